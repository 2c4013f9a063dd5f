"""ks family (placeholder until it lands)."""

def ks_matmul(*a, **k):
    raise NotImplementedError('ks_matmul')


def ks_matmul_vjp(*a, **k):
    raise NotImplementedError('ks_matmul_vjp')


def ks_chain(*a, **k):
    raise NotImplementedError('ks_chain')


def ks_chain_vjp(*a, **k):
    raise NotImplementedError('ks_chain_vjp')


