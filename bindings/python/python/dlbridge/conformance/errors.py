"""The kit's exception."""


class NotExpressible(Exception):
    """Raised by an adapter's ``from_numpy`` when its library cannot hold the source array (its
    dtype, layout or read-only state); the case is skipped for that library."""
