from ._core.io import *  # noqa: F401,F403
