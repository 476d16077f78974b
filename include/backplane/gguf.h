/* gguf.h: GGUF weight files for Backplane (part of libbackplane.so).
 *
 * What it is: a reader that maps a GGUF file (versions 2 and 3, little-endian)
 * and lists its metadata and tensors; a loader that creates those tensors in a
 * bp_context and gives them memory on a device (the file's own pages where
 * the device computes on host memory, else copied into device buffers in
 * bounded chunks); and a writer. Every count, length, offset, dimension and
 * type of a file is checked before use: a bad file gives
 * BP_ERR_INVALID_ARGUMENT with a message naming the field and its byte offset
 * (docs/gguf.md lists the rules).
 * What it is not: a model runner; names and metadata mean what the caller
 * says they mean.
 *
 * Errors follow backplane.h: a bp_status, and bp_last_error() for the
 * message of the last call on this thread.
 *
 * Usage:
 *   bp_gguf *f = NULL;
 *   if (bp_gguf_open("model.gguf", &f)) fprintf(stderr, "%s\n", bp_last_error());
 *   bp_context *ctx = bp_context_new(0);
 *   bp_gguf_weights *w = NULL;
 *   bp_gguf_load(f, ctx, bp_backend_device(be), NULL, &w);
 *   bp_tensor *wq = NULL;
 *   bp_context_find_tensor(ctx, "blk.0.attn_q.weight", &wq);
 *   ...
 *   bp_gguf_weights_free(w); bp_context_free(ctx); bp_gguf_close(f);
 */
#ifndef BACKPLANE_GGUF_H_
#define BACKPLANE_GGUF_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value kinds, numbered as in the file format. */
typedef enum bp_gguf_kind {
  BP_GGUF_U8 = 0,
  BP_GGUF_I8 = 1,
  BP_GGUF_U16 = 2,
  BP_GGUF_I16 = 3,
  BP_GGUF_U32 = 4,
  BP_GGUF_I32 = 5,
  BP_GGUF_F32 = 6,
  BP_GGUF_BOOL = 7,
  BP_GGUF_STRING = 8,
  BP_GGUF_ARRAY = 9,
  BP_GGUF_U64 = 10,
  BP_GGUF_I64 = 11,
  BP_GGUF_F64 = 12
} bp_gguf_kind;

/* Static name of a kind ("u32", "string", ...), "?" when unknown. */
BP_API const char *bp_gguf_kind_name(bp_gguf_kind kind);

/* ------------------------------------------------------------------------ */
/* Reading.                                                                  */

typedef struct bp_gguf bp_gguf;

/* Opens |path| read-only, maps it and checks all of its structure (not the
 * tensor bytes). NOT_FOUND when it cannot be opened, INVALID_ARGUMENT with
 * the field and byte offset when it is not a valid GGUF file. Caller owns
 * *out_file; release with bp_gguf_close. */
BP_API bp_status bp_gguf_open(const char *path, bp_gguf **out_file);
/* The same for |size| bytes at |data|, which the caller keeps valid and
 * unchanged until bp_gguf_close (and until every bp_gguf_weights loaded
 * from it is freed). */
BP_API bp_status bp_gguf_open_memory(const void *data, size_t size, bp_gguf **out_file);
/* Releases the file. The mapping stays while weights loaded from it live.
 * NULL is a no-op. */
BP_API void bp_gguf_close(bp_gguf *file);

/* The format version (2 or 3). */
BP_API uint32_t bp_gguf_version(const bp_gguf *file);
/* general.alignment, or 32 when the file has none. */
BP_API uint64_t bp_gguf_alignment(const bp_gguf *file);
/* Byte offset of the data section in the file. */
BP_API uint64_t bp_gguf_data_offset(const bp_gguf *file);
/* Size of the file in bytes. */
BP_API uint64_t bp_gguf_file_size(const bp_gguf *file);

/* Metadata pairs, in file order. */
BP_API size_t bp_gguf_kv_count(const bp_gguf *file);
/* Key of pair |i| (NUL-terminated). Borrowed; valid until bp_gguf_close.
 * NULL past the end. */
BP_API const char *bp_gguf_kv_key(const bp_gguf *file, size_t i);
/* Index of |key| in *out_index; NOT_FOUND when the file has no such key. */
BP_API bp_status bp_gguf_find_key(const bp_gguf *file, const char *key, size_t *out_index);

/* What pair |i| holds. */
typedef struct bp_gguf_value_info {
  uint32_t struct_size;   /* caller sets sizeof(bp_gguf_value_info) */
  bp_gguf_kind kind;      /* BP_GGUF_ARRAY for an array */
  bp_gguf_kind elem_kind; /* arrays: the kind of their elements; else == kind */
  uint64_t count;         /* arrays: elements; 1 for a single value */
} bp_gguf_value_info;
BP_API bp_status bp_gguf_kv_describe(const bp_gguf *file, size_t i, bp_gguf_value_info *out);

/* Element |elem| of pair |i| (0 for a single value), converted:
 * - _int: any integer kind or bool; INVALID_ARGUMENT for a u64 above INT64_MAX;
 * - _uint: any integer kind or bool, INVALID_ARGUMENT when negative;
 * - _float: f32, f64 or any integer kind;
 * - _string: a string, as a pointer into the file and its length in bytes
 *   (not NUL-terminated; may hold any bytes). Borrowed; valid until
 *   bp_gguf_close.
 * INVALID_ARGUMENT naming the key for another kind or |elem| past the end. */
BP_API bp_status bp_gguf_kv_read_int(const bp_gguf *file, size_t i, uint64_t elem, int64_t *out);
BP_API bp_status bp_gguf_kv_read_uint(const bp_gguf *file, size_t i, uint64_t elem, uint64_t *out);
BP_API bp_status bp_gguf_kv_read_float(const bp_gguf *file, size_t i, uint64_t elem, double *out);
BP_API bp_status bp_gguf_kv_read_string(const bp_gguf *file, size_t i, uint64_t elem, const char **out_data,
                                        uint64_t *out_len);

/* Tensors, in file order. */
BP_API size_t bp_gguf_tensor_count(const bp_gguf *file);
/* Index of tensor |name| in *out_index; NOT_FOUND when absent. */
BP_API bp_status bp_gguf_find_tensor(const bp_gguf *file, const char *name, size_t *out_index);

typedef struct bp_gguf_tensor_info {
  uint32_t struct_size; /* caller sets sizeof(bp_gguf_tensor_info) */
  const char *name;     /* NUL-terminated; borrowed, valid until bp_gguf_close */
  uint32_t n_dims;      /* 1..4 */
  int64_t ne[BP_MAX_DIMS];
  uint32_t file_type;    /* the format's type id (e.g. 8 = q8_0) */
  const char *type_name; /* "q8_0"; static */
  bool supported;        /* Backplane holds this type: bp_gguf_load can load it */
  bp_type type;          /* the Backplane type when supported */
  uint64_t offset;       /* from the start of the data section */
  uint64_t file_offset;  /* from the start of the file */
  uint64_t nbytes;       /* bytes of its data */
} bp_gguf_tensor_info;
BP_API bp_status bp_gguf_tensor_describe(const bp_gguf *file, size_t i, bp_gguf_tensor_info *out);
/* The bytes of tensor |i| inside the file: a pointer into the mapping and
 * nbytes. Borrowed; valid until bp_gguf_close. */
BP_API bp_status bp_gguf_tensor_data(const bp_gguf *file, size_t i, const void **out_data, uint64_t *out_len);

/* The format's type id of a Backplane type, or UINT32_MAX when it has none. */
BP_API uint32_t bp_gguf_file_type_of(bp_type type);

/* ------------------------------------------------------------------------ */
/* Loading onto a device.                                                    */

typedef enum bp_gguf_load_mode {
  BP_GGUF_LOAD_AUTO = 0, /* map where the device computes on host memory, else copy */
  BP_GGUF_LOAD_MAP = 1,  /* map or fail (UNIMPLEMENTED) */
  BP_GGUF_LOAD_COPY = 2  /* copy into buffers of the device, always */
} bp_gguf_load_mode;

typedef struct bp_gguf_load_options {
  uint32_t struct_size; /* caller sets sizeof(bp_gguf_load_options) */
  bp_gguf_load_mode mode;
  const char *name_filter; /* glob (fnmatch: *, ?, [..]) on tensor names; NULL or "" = all */
  size_t chunk_bytes;      /* copy through a bounce buffer of this size; 0 = 16 MiB */
  /* Copy into buffers of this type of |dev| (e.g. bp_device_weight_buffer_type)
   * instead of mapping or the default type; NULL = as |mode| says. Not with
   * BP_GGUF_LOAD_MAP. Callers built before this field (a smaller
   * struct_size) get NULL. */
  bp_buffer_type *buffer_type;
} bp_gguf_load_options;

typedef struct bp_gguf_weights bp_gguf_weights;

/* Creates every tensor of |file| that passes the filter in |ctx| (name,
 * type and shape as in the file, flagged BP_TENSOR_FLAG_PARAM) and gives it
 * memory on |dev| holding its bytes. |options| may be NULL (AUTO, all
 * tensors, 16 MiB). Everything is checked before anything is made: a
 * tensor whose type Backplane does not hold (UNIMPLEMENTED), whose name is
 * too long for BP_MAX_NAME (INVALID_ARGUMENT) or already in |ctx|
 * (ALREADY_EXISTS) fails the call with nothing made. A later failure
 * (allocation, reading) frees every buffer; the tensors already made stay
 * in |ctx| without memory. Caller owns *out_weights; release it with
 * bp_gguf_weights_free when the tensors are no longer used (their memory
 * goes with it). |file| may be closed first: the weights keep the mapping. */
BP_API bp_status bp_gguf_load(const bp_gguf *file, bp_context *ctx, bp_device *dev, const bp_gguf_load_options *options,
                              bp_gguf_weights **out_weights);
/* Frees the buffers (the tensors of the context lose their memory) and the
 * reference on the mapping. NULL is a no-op. */
BP_API void bp_gguf_weights_free(bp_gguf_weights *weights);
/* True when the tensors live in the file's mapped pages (nothing copied). */
BP_API bool bp_gguf_weights_mapped(const bp_gguf_weights *weights);
BP_API size_t bp_gguf_weights_tensor_count(const bp_gguf_weights *weights);
BP_API uint64_t bp_gguf_weights_bytes(const bp_gguf_weights *weights);
/* Buffers holding the tensors (several when mapped tensors are not aligned
 * for the device, or one buffer would pass the device's maximum). Borrowed;
 * owned by |weights|. */
BP_API size_t bp_gguf_weights_buffer_count(const bp_gguf_weights *weights);
BP_API bp_buffer *bp_gguf_weights_buffer(const bp_gguf_weights *weights, size_t i);

/* ------------------------------------------------------------------------ */
/* Writing.                                                                  */

typedef struct bp_gguf_writer bp_gguf_writer;

/* New empty writer (version 3, alignment 32). Caller owns; release with
 * bp_gguf_writer_free. */
BP_API bp_status bp_gguf_writer_new(bp_gguf_writer **out_writer);
BP_API void bp_gguf_writer_free(bp_gguf_writer *writer); /* NULL ok */
/* Sets general.alignment (a non-zero multiple of 8) and writes it as a u32 pair. */
BP_API bp_status bp_gguf_writer_set_alignment(bp_gguf_writer *writer, uint32_t alignment);
/* Adds a single value of |kind| (not STRING or ARRAY) read from |value|
 * (a uint8_t, int8_t, ..., double, or a bool as uint8_t 0/1). Copied.
 * ALREADY_EXISTS for a key already added; INVALID_ARGUMENT for a key that is
 * empty, longer than 65535 bytes or not UTF-8. */
BP_API bp_status bp_gguf_writer_add_value(bp_gguf_writer *writer, const char *key, bp_gguf_kind kind,
                                          const void *value);
/* Adds a string of |len| bytes (any bytes). Copied. */
BP_API bp_status bp_gguf_writer_add_string(bp_gguf_writer *writer, const char *key, const char *data, uint64_t len);
/* Adds an array of |count| elements of |elem_kind| (not ARRAY): packed
 * values at |values|, or for STRING an array of |count| NUL-terminated
 * strings (const char *const *). Copied. */
BP_API bp_status bp_gguf_writer_add_array(bp_gguf_writer *writer, const char *key, bp_gguf_kind elem_kind,
                                          const void *values, uint64_t count);
/* Adds tensor |t| (contiguous, with memory, a name of 1..63 bytes, unique):
 * its bytes are read with bp_tensor_get when the file is written, so |t|
 * stays borrowed until bp_gguf_writer_write returns. */
BP_API bp_status bp_gguf_writer_add_tensor(bp_gguf_writer *writer, const bp_tensor *t);
/* Adds a tensor from host bytes: |file_type| is the format's type id (any
 * the format defines, also ones Backplane does not hold), |ne| its n_dims
 * dimensions; |size| must be the type's byte count for that shape. |data|
 * is borrowed until bp_gguf_writer_write returns. */
BP_API bp_status bp_gguf_writer_add_tensor_data(bp_gguf_writer *writer, const char *name, uint32_t file_type,
                                                int n_dims, const int64_t *ne, const void *data, uint64_t size);
/* Writes the file (to a temporary name beside |path|, renamed at the end,
 * so a failure leaves no partial file). The writer may be written again. */
BP_API bp_status bp_gguf_writer_write(const bp_gguf_writer *writer, const char *path);

/* Names before 0.3, kept as deprecated aliases until 0.3 (docs/api-guide.md,
 * "Renamed before 0.3"). Each forwards to the function named in its message.
 * Define BP_NO_DEPRECATED to hide them. */
#ifndef BP_NO_DEPRECATED /* BP_DEPRECATED comes from deprecated.h, through backplane.h */
BP_DEPRECATED("bp_gguf_kv_describe")
BP_API bp_status bp_gguf_kv_info(const bp_gguf *file, size_t i, bp_gguf_value_info *out);
BP_DEPRECATED("bp_gguf_kv_read_int")
BP_API bp_status bp_gguf_kv_get_int(const bp_gguf *file, size_t i, uint64_t elem, int64_t *out);
BP_DEPRECATED("bp_gguf_kv_read_uint")
BP_API bp_status bp_gguf_kv_get_uint(const bp_gguf *file, size_t i, uint64_t elem, uint64_t *out);
BP_DEPRECATED("bp_gguf_kv_read_float")
BP_API bp_status bp_gguf_kv_get_float(const bp_gguf *file, size_t i, uint64_t elem, double *out);
BP_DEPRECATED("bp_gguf_kv_read_string")
BP_API bp_status bp_gguf_kv_get_string(const bp_gguf *file, size_t i, uint64_t elem, const char **out_data,
                                       uint64_t *out_len);
BP_DEPRECATED("bp_gguf_tensor_describe")
BP_API bp_status bp_gguf_tensor_get_info(const bp_gguf *file, size_t i, bp_gguf_tensor_info *out);
#endif /* BP_NO_DEPRECATED */

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_GGUF_H_ */
