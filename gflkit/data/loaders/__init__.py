"""Built-in dataset loaders; importing this package registers them (one module per dataset).

=========================  ===================  ======================================================================
name                       module               raw files
=========================  ===================  ======================================================================
``mnist``                  :mod:`.mnist`        the four gzip IDX files
``cifar10``, ``cifar100``  :mod:`.cifar`        the official python archives (pickles, verified first)
``femnist``                :mod:`.femnist`      LEAF json shards (gzip), 105 writers
``shakespeare``            :mod:`.shakespeare`  TFF HDF5 (``source="tff"``) or LEAF json (``source="leaf"``)
``celeba``                 :mod:`.celeba`       attribute / identity files (gzip), aligned JPEGs or a half-size subset
``metr_la``                :mod:`.metr_la`      DCRNN's ``metr-la.h5`` (pandas HDF) and sensor graph (``adj_mx.npz``)
``pems_bay``               :mod:`.pems_bay`     DCRNN's ``pems-bay.h5`` and sensor graph (``adj_mx_bay.npz``)
``pemsd4``, ``pemsd8``     :mod:`.pemsd`        ASTGCN's ``PEMS0x.npz`` readings and ``PEMS0x.csv`` road distances
``digits``                 :mod:`.digits`       none: scikit-learn's embedded 8×8 digits
=========================  ===================  ======================================================================

The traffic datasets share windows, split, scaler and sample layout (:mod:`.traffic`); their sensor graphs
load alone with :func:`.traffic.load_traffic_graph`.

Graph datasets (``load_graph``):

==================================  =====================  ==========================================================
name                                module                 raw files
==================================  =====================  ==========================================================
``cora``, ``citeseer``, ``pubmed``  :mod:`.planetoid`      Planetoid's ``ind.<name>.*`` (pickles, verified first)
``cora_full``                       :mod:`.citation_full`  graph2gauss ``cora.npz``
``polblogs``                        :mod:`.polblogs`       Nettack ``polblogs.npz`` (+ Newman's ``polblogs.gml``)
``flickr``                          :mod:`.flickr`         GraphSAINT files; registered once pinned (``flickr_spec``)
==================================  =====================  ==========================================================
"""
from gflkit.data.loaders import (  # noqa: F401
    celeba,
    cifar,
    citation_full,
    digits,
    femnist,
    flickr,
    metr_la,
    mnist,
    pems_bay,
    pemsd,
    planetoid,
    polblogs,
    shakespeare,
    traffic,
)

__all__ = ["celeba", "cifar", "citation_full", "digits", "femnist", "flickr", "metr_la", "mnist", "pems_bay",
           "pemsd", "planetoid", "polblogs", "shakespeare", "traffic"]
