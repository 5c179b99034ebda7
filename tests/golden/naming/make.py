"""How MXNet 1.9.1 auto-names nodes made through its operator sub-namespaces (contrib, linalg,
image, sparse, random): node name, outputs, arguments and the tojson node names, for
tests/symbol/test_namespace_naming.py (which builds the same cases, by id, in nnsym).
Run: ~/mxref/bin/python tests/golden/naming/make.py tests/golden/naming/naming.json"""

import json
import sys
from pathlib import Path

import mxnet as mx


def cases(m, d, e):
    """Case id -> a function building the symbol; shared text with the nnsym test."""
    s = m.sym
    return {
        "contrib.box_nms": lambda: s.contrib.box_nms(d),
        "contrib.quadratic": lambda: s.contrib.quadratic(d, a=1.0),
        "contrib.MultiBoxPrior": lambda: s.contrib.MultiBoxPrior(d),
        "contrib.ROIAlign": lambda: s.contrib.ROIAlign(d, e, pooled_size=(2, 2),
                                                       spatial_scale=1.0),
        "contrib.box_iou": lambda: s.contrib.box_iou(d, e),
        "contrib.arange_like": lambda: s.contrib.arange_like(d),
        "contrib.DeformableConvolution": lambda: s.contrib.DeformableConvolution(
            d, kernel=(1, 1), num_filter=2),
        "linalg.gemm2": lambda: s.linalg.gemm2(d, e),
        "linalg.potrf": lambda: s.linalg.potrf(d),
        "linalg_gemm2": lambda: s.linalg_gemm2(d, e),
        "image.to_tensor": lambda: s.image.to_tensor(d),
        "image.resize": lambda: s.image.resize(d, size=2),
        "sparse.retain": lambda: s.sparse.retain(d, e),
        "sparse.dot": lambda: s.sparse.dot(d, e),
        "random.uniform": lambda: s.random.uniform(),
        "random.randint": lambda: s.random.randint(0, 3),
        "random.normal_like": lambda: s.random.normal_like(d),
        "sample_normal": lambda: s.sample_normal(d, e),
        "random_uniform": lambda: s.random_uniform(),
        "twice": lambda: s.contrib.box_iou(s.contrib.box_iou(d, e), e),
    }


def main(out: Path) -> None:
    res = {}
    for cid, fn in cases(mx, mx.sym.var("d"), mx.sym.var("e")).items():
        with mx.name.NameManager():
            sy = fn()
        nodes = json.loads(sy.tojson())["nodes"]
        res[cid] = {
            "name": sy.name,
            "list_outputs": sy.list_outputs(),
            "list_arguments": sy.list_arguments(),
            "nodes": [[n["op"], n["name"]] for n in nodes if n["op"] != "null"],
        }
    out.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
