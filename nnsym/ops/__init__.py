"""The operator library, one package per family. Importing this package registers every operator
exactly once."""

from nnsym.ir.opdef import REGISTRY, OpDef, get_op
from nnsym.ops.contrib_misc import graph, hawkes, index_copy, misc, spectral  # noqa: F401
from nnsym.ops.conv import (  # noqa: F401
    conv,
    correlation,
    crop,
    deconv,
    deformable_conv,
    device,
    im2col,
    legacy,
    psroi_pooling,
    roi_align,
    roi_pooling,
    spatial,
    upsampling,
)
from nnsym.ops.custom import CUSTOM  # noqa: F401
from nnsym.ops.detection import box, multibox, proposal  # noqa: F401
from nnsym.ops.dot import device as dot_device  # noqa: F401
from nnsym.ops.dot import dot, fully_connected, interleaved  # noqa: F401
from nnsym.ops.dynamic import boolean_mask, dgl  # noqa: F401
from nnsym.ops.elemwise import broadcast, contrib_unary, elemwise  # noqa: F401
from nnsym.ops.image import image, image_random, resize2d  # noqa: F401
from nnsym.ops.linalg import linalg  # noqa: F401
from nnsym.ops.nn import (  # noqa: F401
    activation,
    batch_norm,
    contrib_nn,
    ctc,
    dropout,
    embedding,
    kl_sparse_reg,
    loss,
    lrn,
    moments,
    norm,
    rnn,
    sequence,
)
from nnsym.ops.optim import multi, updates  # noqa: F401
from nnsym.ops.quantization import (  # noqa: F401
    arith,
    asym,
    calibrate,
    concat,
    qbatch_norm,
    qconv,
    qembedding,
    qfully_connected,
    qpooling,
    quantize,
    simple,
)
from nnsym.ops.random import pdf, permute, sample, unique_zipfian  # noqa: F401
from nnsym.ops.reduce import (  # noqa: F401
    broadcast_reduce,
    fill0,
    finite,
    gather_nd,
    index,
    indexing,
    ravel,
    scan,
    sort,
)
from nnsym.ops.shape import (  # noqa: F401
    cast,
    join,
    like,
    pad,
    rearrange,
    reshape,
    slicing,
    transpose,
)
from nnsym.ops.storage import sparse_defs  # noqa: F401

__all__ = ["REGISTRY", "OpDef", "get_op"]
