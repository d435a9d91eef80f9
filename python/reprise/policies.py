from ._core.policies import *  # noqa: F401,F403
