"""scan family (placeholder until it lands)."""

def diag_scan(*a, **k):
    raise NotImplementedError('diag_scan')


def diag_scan_vjp(*a, **k):
    raise NotImplementedError('diag_scan_vjp')


def circulant_scan(*a, **k):
    raise NotImplementedError('circulant_scan')


def circulant_scan_vjp(*a, **k):
    raise NotImplementedError('circulant_scan_vjp')


def block_circulant_scan(*a, **k):
    raise NotImplementedError('block_circulant_scan')


def block_circulant_scan_vjp(*a, **k):
    raise NotImplementedError('block_circulant_scan_vjp')


