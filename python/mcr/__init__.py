"""mcr: a mix-and-match communication runtime. The PyTorch integration is ``mcr.torch``."""
