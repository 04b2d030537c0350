"""Built-in dataset loaders; importing this package registers them (one module per dataset).

| name | module | raw files |
|---|---|---|
| ``mnist`` | :mod:`.mnist` | the four gzip IDX files |
| ``cifar10``, ``cifar100`` | :mod:`.cifar` | the official python archives (pickles, verified first) |
| ``femnist`` | :mod:`.femnist` | LEAF json shards (gzip), 105 writers |
| ``shakespeare`` | :mod:`.shakespeare` | TFF HDF5 (``source="tff"``) or LEAF json (``source="leaf"``) |
| ``metr_la`` | :mod:`.metr_la` | DCRNN's ``metr-la.h5`` (pandas HDF) and sensor graph (``adj_mx.npz``) |
| ``digits`` | :mod:`.digits` | none: scikit-learn's embedded 8×8 digits |
"""
from gflkit.data.loaders import cifar, digits, femnist, metr_la, mnist, shakespeare  # noqa: F401

__all__ = ["cifar", "digits", "femnist", "metr_la", "mnist", "shakespeare"]
