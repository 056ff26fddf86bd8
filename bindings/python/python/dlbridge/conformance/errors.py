"""The kit's exceptions."""


class NotExpressible(Exception):
    """Raised by an adapter's ``from_numpy`` when its library cannot hold the source array (its
    dtype, layout or read-only state); the case is skipped for that library."""


class NoDevice(Exception):
    """Raised by an adapter's ``load()`` when the library is installed but the device its arrays
    live on is not there (no CUDA device, or a build of the library without CUDA): every check
    is skipped, with the message as the reason."""
