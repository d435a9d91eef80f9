from ._core.nn import *  # noqa: F401,F403
