"""toeplitz family (placeholder until it lands)."""

class BlockToeplitz:
    def __init__(self, *a, **k):
        raise NotImplementedError('BlockToeplitz')


def read_vector(*a, **k):
    raise NotImplementedError('read_vector')


def write_vector(*a, **k):
    raise NotImplementedError('write_vector')


