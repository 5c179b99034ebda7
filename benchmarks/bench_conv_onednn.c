#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <oneapi/dnnl/dnnl.h>

#define CK(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)s_); return NULL; } } while (0)
#define CKI(x) do { dnnl_status_t s_ = (x); if (s_ != dnnl_success) { fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)s_); return -1; } } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

int bench_init(void) {
    CKI(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CKI(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    return 0;
}

/* slot: 0,1 inputs, 2 output (user pointers).  */
typedef struct {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[8];
    /* per user slot: user memory, internal memory (NULL if same), reorder to/from */
    dnnl_memory_t user[3], inner[3];
    dnnl_primitive_t reorder[3];
    int is_out[3];
    int arg[3];
} conv_t;

static dnnl_memory_desc_t md4(const int64_t *d, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md; dnnl_dims_t dims = {d[0], d[1], d[2], d[3]};
    if (dnnl_memory_desc_create_with_tag(&md, 4, dims, dnnl_f32, tag) != dnnl_success) return NULL;
    return md;
}

/* g = N,C,H,W,F,KH,KW,SH,SW,PH,PW,OH,OW ; kind 0 fwd, 1 bwd data, 2 bwd weights; blocked 0/1; post 0 none, 1 relu, 2 sum */
conv_t *conv_make(int kind, int blocked, const int64_t *g, int post) {
    int64_t N=g[0],C=g[1],H=g[2],W=g[3],F=g[4],KH=g[5],KW=g[6],SH=g[7],SW=g[8],PH=g[9],PW=g[10],OH=g[11],OW=g[12];
    int64_t xs[4]={N,C,H,W}, ws[4]={F,C,KH,KW}, ys[4]={N,F,OH,OW};
    dnnl_format_tag_t t = blocked ? dnnl_format_tag_any : dnnl_nchw;
    dnnl_format_tag_t tw = blocked ? dnnl_format_tag_any : dnnl_oihw;
    dnnl_memory_desc_t x = md4(xs, t), w = md4(ws, tw), y = md4(ys, t);
    dnnl_dims_t st = {SH, SW}, dl = {0, 0}, pl = {PH, PW};
    dnnl_dims_t pr = {(OH - 1) * SH + KH - H - PH, (OW - 1) * SW + KW - W - PW};
    dnnl_primitive_attr_t attr = NULL;
    if (post) {
        dnnl_post_ops_t po; CK(dnnl_post_ops_create(&po));
        if (post == 1) CK(dnnl_post_ops_append_eltwise(po, dnnl_eltwise_relu, 0.f, 0.f));
        else CK(dnnl_post_ops_append_sum(po, 1.f, 0, dnnl_data_type_undef));
        CK(dnnl_primitive_attr_create(&attr));
        CK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t fwd, pd;
    CK(dnnl_convolution_forward_primitive_desc_create(&fwd, eng, kind ? dnnl_forward_training : dnnl_forward_inference,
        dnnl_convolution_direct, x, w, NULL, y, st, dl, pl, pr, kind ? NULL : attr));
    if (kind == 0) pd = fwd;
    else if (kind == 1) CK(dnnl_convolution_backward_data_primitive_desc_create(&pd, eng, dnnl_convolution_direct, x, w, y, st, dl, pl, pr, fwd, NULL));
    else CK(dnnl_convolution_backward_weights_primitive_desc_create(&pd, eng, dnnl_convolution_direct, x, w, NULL, y, st, dl, pl, pr, fwd, NULL));
    conv_t *c = calloc(1, sizeof *c);
    CK(dnnl_primitive_create(&c->prim, pd));
    /* user slots */
    int64_t *shp[3]; dnnl_query_t q[3]; int a[3]; int out[3] = {0,0,1};
    if (kind == 0) { shp[0]=xs; shp[1]=ws; shp[2]=ys; q[0]=dnnl_query_src_md; q[1]=dnnl_query_weights_md; q[2]=dnnl_query_dst_md; a[0]=DNNL_ARG_SRC; a[1]=DNNL_ARG_WEIGHTS; a[2]=DNNL_ARG_DST; }
    else if (kind == 1) { shp[0]=ys; shp[1]=ws; shp[2]=xs; q[0]=dnnl_query_diff_dst_md; q[1]=dnnl_query_weights_md; q[2]=dnnl_query_diff_src_md; a[0]=DNNL_ARG_DIFF_DST; a[1]=DNNL_ARG_WEIGHTS; a[2]=DNNL_ARG_DIFF_SRC; }
    else { shp[0]=xs; shp[1]=ys; shp[2]=ws; q[0]=dnnl_query_src_md; q[1]=dnnl_query_diff_dst_md; q[2]=dnnl_query_diff_weights_md; a[0]=DNNL_ARG_SRC; a[1]=DNNL_ARG_DIFF_DST; a[2]=DNNL_ARG_DIFF_WEIGHTS; }
    for (int i = 0; i < 3; ++i) {
        int isw = (kind == 0 && i == 1) || (kind == 1 && i == 1) || (kind == 2 && i == 2);
        dnnl_memory_desc_t umd = md4(shp[i], isw ? dnnl_oihw : dnnl_nchw);
        const_dnnl_memory_desc_t imd = dnnl_primitive_desc_query_md(pd, q[i], 0);
        CK(dnnl_memory_create(&c->user[i], umd, eng, DNNL_MEMORY_NONE));
        c->is_out[i] = out[i]; c->arg[i] = a[i];
        if (!dnnl_memory_desc_equal(umd, imd)) {
            CK(dnnl_memory_create(&c->inner[i], imd, eng, DNNL_MEMORY_ALLOCATE));
            dnnl_primitive_desc_t rpd;
            if (out[i]) CK(dnnl_reorder_primitive_desc_create(&rpd, imd, eng, umd, eng, NULL));
            else CK(dnnl_reorder_primitive_desc_create(&rpd, umd, eng, imd, eng, NULL));
            CK(dnnl_primitive_create(&c->reorder[i], rpd));
        }
        c->args[c->nargs].arg = a[i];
        c->args[c->nargs].memory = c->inner[i] ? c->inner[i] : c->user[i];
        c->nargs++;
    }
    return c;
}

/* mode 0: with reorders (user NCHW in and out); 1: primitive only (data already in its layout) */
int conv_run(conv_t *c, void *p0, void *p1, void *p2, int mode) {
    void *p[3] = {p0, p1, p2};
    for (int i = 0; i < 3; ++i) CKI(dnnl_memory_set_data_handle(c->user[i], p[i]));
    if (mode == 0)
        for (int i = 0; i < 3; ++i) if (c->reorder[i] && !c->is_out[i]) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, c->user[i]}, {DNNL_ARG_TO, c->inner[i]}};
            CKI(dnnl_primitive_execute(c->reorder[i], strm, 2, ra));
        }
    CKI(dnnl_primitive_execute(c->prim, strm, c->nargs, c->args));
    if (mode == 0)
        for (int i = 0; i < 3; ++i) if (c->reorder[i] && c->is_out[i]) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, c->inner[i]}, {DNNL_ARG_TO, c->user[i]}};
            CKI(dnnl_primitive_execute(c->reorder[i], strm, 2, ra));
        }
    CKI(dnnl_stream_wait(strm));
    return 0;
}

int conv_blocked(conv_t *c) { int n = 0; for (int i = 0; i < 3; ++i) n += c->reorder[i] != NULL; return n; }
const char *impl(conv_t *c) { const_dnnl_primitive_desc_t pd; dnnl_primitive_get_primitive_desc(c->prim, &pd); const char *s; dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s); return s; }
