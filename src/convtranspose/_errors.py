"""Exception types raised by convtranspose."""

__all__ = ["ConvTransposeError", "ResultTooLargeError", "install_hint"]


class ConvTransposeError(ValueError):
    """An invalid shape or attribute for a transposed convolution.

    The message names the argument, the value received and the rule it broke.
    It subclasses :class:`ValueError`, so ``except ValueError`` also catches it.
    Mismatched or unsupported dtypes raise :class:`TypeError` instead.
    """


class ResultTooLargeError(ConvTransposeError, MemoryError):
    """A call would need more memory than it may take, or an array NumPy cannot hold.

    Raised before anything is allocated (so nothing is left behind), in well under a
    second, by every array function (the transposed convolutions, the forward
    convolutions and the gradients, which count their memory by one rule), and by the
    shape rules of :mod:`convtranspose.shapes` for an output of more than 2**60
    elements.  The limit is :func:`convtranspose.get_max_bytes`: the machine's memory
    unless :func:`convtranspose.set_max_bytes` or :func:`convtranspose.limit_memory`
    lowered it.  It is both a :class:`ConvTransposeError` (so a ``ValueError``: the
    arguments ask for too much) and a :class:`MemoryError`.

    Attributes
    ----------
    argument : str
        The argument that makes the request this large: an attribute
        (``"output_shape"``, ``"strides"``, ``"dilations"``, ``"output_padding"``;
        ``"pads_begin and pads_end"`` for a forward convolution) or an operand
        (``"data"``, ``"filter"``; the gradients name their data operand as their
        function does, ``"input"`` or ``"X"`` too).
    nbytes : int
        The bytes the call would need (for an array NumPy cannot hold at all, the
        bytes its shape spans).
    limit : int or None
        The limit it exceeds, in bytes (None when NumPy itself cannot hold the array).
    """

    def __init__(self, message: str, *, argument: str, nbytes: int, limit: int | None):
        super().__init__(message)
        self.argument, self.nbytes, self.limit = argument, nbytes, limit


def install_hint(extra: str) -> str:
    """How to install an optional extra, for error messages.

    The package is installed from a checkout of its repository (it is not on a package
    index), so every message names the same command, run in the checkout's folder.

    Parameters
    ----------
    extra : str
        The extra's name in ``pyproject.toml`` (``"interop"``, ``"dask"``, ...); several
        are joined by commas (``"peers,bench"``).

    Returns
    -------
    str
        ``pip install '.[extra]'`` and where to run it.

    Examples
    --------
    >>> install_hint("dask")
    "pip install '.[dask]' in a checkout of the convtranspose repository"
    """
    return f"pip install '.[{extra}]' in a checkout of the convtranspose repository"
