/* Pretraining instances and their TFRecords in C: the same algorithm, the same random draws.
 *
 * `create_instances` runs `pretraining.instances.create_training_instances` (document shuffle,
 * dupe_factor passes, NSP pairs or contiguous text, masking, final shuffle) on a flat corpus,
 * drawing from its own copy of a `random.Random` state (MT19937, with `random()`,
 * `getrandbits()` and `_randbelow()` exactly as CPython's), and hands the state back.
 * `encode_records` serializes instances as framed TFRecords of tf.train.Example, byte for byte
 * what `tfrecords.encode_example` + `frame_record` write; it runs without the GIL.
 *
 * The Python side (`pretraining/native.py`) flattens the input and checks this module against
 * the pure-Python implementation before using it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ random.Random */
#define MT_N 624
#define MT_M 397

typedef struct {
    uint32_t mt[MT_N];
    int index; /* next word to temper; MT_N: regenerate first */
} Twister;

static void twister_regenerate(Twister *t)
{
    uint32_t *mt = t->mt;
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (mt[k] & 0x80000000u) | (mt[(k + 1) % MT_N] & 0x7fffffffu);
        mt[k] = mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    t->index = 0;
}

static inline uint32_t next_word(Twister *t)
{
    if (t->index >= MT_N)
        twister_regenerate(t);
    uint32_t y = t->mt[t->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* random.random(): 53 bits from two words. */
static inline double next_double(Twister *t)
{
    uint32_t a = next_word(t) >> 5, b = next_word(t) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* random.Random._randbelow(n), 0 < n < 2**32: getrandbits(n.bit_length()) until below n.
   Total: n == 0 gives 0 without a draw, n >= 2**32 is treated as 2**32 - 1 (callers never pass
   either; this keeps the bit count defined). */
static inline uint32_t next_below(Twister *t, uint64_t n)
{
    if (n == 0)
        return 0;
    if (n > 0xFFFFFFFFull)
        n = 0xFFFFFFFFull;
    int bits = 64 - __builtin_clzll(n);
    uint32_t r;
    do {
        r = next_word(t) >> (32 - bits);
    } while (r >= n);
    return r;
}

/* random.randint(a, b); an empty range (b < a) gives a without a draw. The maker's arguments are
   checked so that this never happens (random.randint raises there). */
static inline int64_t next_int(Twister *t, int64_t a, int64_t b)
{
    if (b < a)
        return a;
    return a + next_below(t, (uint64_t)(b - a + 1));
}

/* random.shuffle(x) of int64 items */
static void shuffle_int64(Twister *t, int64_t *x, Py_ssize_t n)
{
    for (Py_ssize_t i = n - 1; i > 0; i--) {
        Py_ssize_t j = next_below(t, (uint64_t)i + 1);
        int64_t swap = x[i];
        x[i] = x[j];
        x[j] = swap;
    }
}

/* ------------------------------------------------------------------ growable byte buffers */
typedef struct {
    char *data;
    size_t size, capacity;
} Buffer;

static int buffer_reserve(Buffer *b, size_t extra)
{
    if (b->size + extra <= b->capacity)
        return 0;
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->size + extra)
        capacity *= 2;
    char *data = realloc(b->data, capacity);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static int buffer_append(Buffer *b, const void *item, size_t size)
{
    if (buffer_reserve(b, size) < 0)
        return -1;
    memcpy(b->data + b->size, item, size);
    b->size += size;
    return 0;
}

static inline int push_i32(Buffer *b, int32_t x) { return buffer_append(b, &x, sizeof x); }
static inline int push_i64(Buffer *b, int64_t x) { return buffer_append(b, &x, sizeof x); }
static inline int32_t *as_i32(const Buffer *b) { return (int32_t *)b->data; }
static inline size_t count_i32(const Buffer *b) { return b->size / sizeof(int32_t); }

static void buffer_free(Buffer *b)
{
    free(b->data);
    b->data = NULL;
    b->size = b->capacity = 0;
}

/* Moves a buffer into a new bytes object (NULL on error). */
static PyObject *buffer_to_bytes(Buffer *b)
{
    PyObject *bytes = PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->size);
    buffer_free(b);
    return bytes;
}

/* ------------------------------------------------------------------ instance creation */
typedef struct {
    /* corpus: sentence s is tokens[sentence_start[s]:sentence_start[s+1]], document d holds
     * sentences document_start[d] .. document_start[d+1]-1; continuation marks are -(id+1) */
    const int32_t *tokens;
    const int64_t *sentence_start;
    const int64_t *document_start;
    Py_ssize_t n_documents;
    int64_t *document_order; /* after the shuffle: position -> document */
    /* vocabulary */
    const int32_t *random_words;
    Py_ssize_t n_random_words;
    const uint8_t *continues_word; /* by id: a '##' piece */
    Py_ssize_t vocab_size;
    int32_t cls, sep, mask;
    /* flags */
    int64_t max_seq_length, max_predictions;
    double short_seq_prob, masked_lm_prob;
    int whole_word_mask, no_nsp;
    Twister rng;
    /* scratch */
    Buffer a, b, sequence, group_positions, group_start, group_order, masked;
    uint8_t *covered;
    /* output: instance i is ids[offsets[i]:offsets[i+1]] (masked, plain ids); its first
     * segment_a[i] tokens have segment id 0; masks likewise with masked_offsets */
    Buffer ids, offsets, segment_a, masked_positions, masked_ids, masked_offsets, random_next;
} Maker;

static inline int32_t plain_id(int32_t token) { return token >= 0 ? token : -token - 1; }

static inline int continues_word(const Maker *m, int32_t token)
{
    return token < 0 || (token < m->vocab_size && m->continues_word[token]);
}

static int compare_masked(const void *x, const void *y)
{
    int32_t a = ((const int32_t *)x)[0], b = ((const int32_t *)y)[0];
    return (a > b) - (a < b);
}

/* create_masked_lm_predictions on m->sequence, then the instance goes to the output. */
static int emit_instance(Maker *m, int64_t segment_a, int random_next)
{
    const int32_t *tokens = as_i32(&m->sequence);
    int64_t n = (int64_t)count_i32(&m->sequence);
    int64_t first = (int64_t)count_i32(&m->ids);
    for (int64_t i = 0; i < n; i++)
        if (push_i32(&m->ids, plain_id(tokens[i])) < 0)
            return -1;

    /* Candidate groups (positions masked together), in sequence order. */
    m->group_positions.size = m->group_start.size = m->group_order.size = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t token = tokens[i];
        if (token == m->cls || token == m->sep)
            continue;
        int joins = m->whole_word_mask && m->group_start.size && continues_word(m, token);
        if (!joins && push_i32(&m->group_start, (int32_t)count_i32(&m->group_positions)) < 0)
            return -1;
        if (push_i32(&m->group_positions, (int32_t)i) < 0)
            return -1;
    }
    Py_ssize_t n_groups = (Py_ssize_t)count_i32(&m->group_start);
    if (push_i32(&m->group_start, (int32_t)count_i32(&m->group_positions)) < 0)
        return -1;
    if (buffer_reserve(&m->group_order, (size_t)n_groups * sizeof(int64_t)) < 0)
        return -1;
    int64_t *order = (int64_t *)m->group_order.data;
    for (Py_ssize_t g = 0; g < n_groups; g++)
        order[g] = g;
    shuffle_int64(&m->rng, order, n_groups);

    int64_t budget = (int64_t)nearbyint((double)n * m->masked_lm_prob); /* round half even */
    if (budget < 1)
        budget = 1;
    if (budget > m->max_predictions)
        budget = m->max_predictions;

    const int32_t *positions = as_i32(&m->group_positions);
    const int32_t *group_start = as_i32(&m->group_start);
    int32_t *output = as_i32(&m->ids) + first;
    memset(m->covered, 0, (size_t)n);
    m->masked.size = 0;
    int64_t n_masked = 0;
    for (Py_ssize_t g = 0; g < n_groups; g++) {
        if (n_masked >= budget)
            break;
        int32_t begin = group_start[order[g]], end = group_start[order[g] + 1];
        if (n_masked + (end - begin) > budget)
            continue; /* a whole word that would overshoot is skipped, not cut */
        int any_covered = 0;
        for (int32_t k = begin; k < end; k++)
            any_covered |= m->covered[positions[k]];
        if (any_covered)
            continue;
        for (int32_t k = begin; k < end; k++) {
            int32_t p = positions[k];
            int32_t pair[2] = {p, output[p]};
            m->covered[p] = 1;
            if (next_double(&m->rng) < 0.8)
                output[p] = m->mask;
            else if (next_double(&m->rng) >= 0.5)
                output[p] = m->random_words[next_int(&m->rng, 0, m->n_random_words - 1)];
            if (buffer_append(&m->masked, pair, sizeof pair) < 0)
                return -1;
            n_masked++;
        }
    }
    int32_t *pairs = as_i32(&m->masked);
    qsort(pairs, (size_t)n_masked, 2 * sizeof(int32_t), compare_masked);
    for (int64_t k = 0; k < n_masked; k++)
        if (push_i32(&m->masked_positions, pairs[2 * k]) < 0 ||
            push_i32(&m->masked_ids, pairs[2 * k + 1]) < 0)
            return -1;
    uint8_t flag = (uint8_t)random_next;
    if (push_i64(&m->offsets, (int64_t)count_i32(&m->ids)) < 0 ||
        push_i64(&m->masked_offsets, (int64_t)count_i32(&m->masked_positions)) < 0 ||
        push_i32(&m->segment_a, (int32_t)segment_a) < 0 ||
        buffer_append(&m->random_next, &flag, 1) < 0)
        return -1;
    return 0;
}

static inline Py_ssize_t document_sentences(const Maker *m, int64_t document)
{
    return (Py_ssize_t)(m->document_start[document + 1] - m->document_start[document]);
}

/* Appends sentences [first, last) of the corpus to b. */
static int append_sentences(const Maker *m, Buffer *b, int64_t first, int64_t last)
{
    int64_t begin = m->sentence_start[first], end = m->sentence_start[last];
    return buffer_append(b, m->tokens + begin, (size_t)(end - begin) * sizeof(int32_t));
}

static int64_t sentence_length(const Maker *m, int64_t sentence)
{
    return m->sentence_start[sentence + 1] - m->sentence_start[sentence];
}

static int64_t target_length(Maker *m, int64_t max_num_tokens)
{
    if (next_double(&m->rng) < m->short_seq_prob)
        return next_int(&m->rng, 2, max_num_tokens);
    return max_num_tokens;
}

/* create_instances_from_document: sentence pairs A/B, B random half the time. */
static int instances_from_document(Maker *m, Py_ssize_t document_index)
{
    int64_t document = m->document_order[document_index];
    int64_t base = m->document_start[document];
    Py_ssize_t n_sentences = document_sentences(m, document);
    int64_t max_num_tokens = m->max_seq_length - 3;
    int64_t target = target_length(m, max_num_tokens);

    int64_t chunk_first = 0, chunk_count = 0, chunk_length = 0;
    for (int64_t i = 0; i < n_sentences; i++) {
        if (chunk_count == 0)
            chunk_first = i;
        chunk_count++;
        chunk_length += sentence_length(m, base + i);
        if (!(i == n_sentences - 1 || chunk_length >= target))
            continue;
        int64_t a_end = chunk_count >= 2 ? next_int(&m->rng, 1, chunk_count - 1) : 1;
        m->a.size = m->b.size = 0;
        if (append_sentences(m, &m->a, base + chunk_first, base + chunk_first + a_end) < 0)
            return -1;
        int random_next;
        if (chunk_count == 1 || next_double(&m->rng) < 0.5) {
            random_next = 1;
            int64_t target_b = target - (int64_t)count_i32(&m->a);
            int64_t random_index = 0;
            for (int attempt = 0; attempt < 10; attempt++) {
                random_index = next_int(&m->rng, 0, m->n_documents - 1);
                if (random_index != document_index)
                    break;
            }
            int64_t other = m->document_order[random_index];
            int64_t other_base = m->document_start[other];
            int64_t start = next_int(&m->rng, 0, document_sentences(m, other) - 1);
            for (int64_t s = start; s < document_sentences(m, other); s++) {
                if (append_sentences(m, &m->b, other_base + s, other_base + s + 1) < 0)
                    return -1;
                if ((int64_t)count_i32(&m->b) >= target_b)
                    break;
            }
            i -= chunk_count - a_end; /* the unused sentences go back for the next instance */
        } else {
            random_next = 0;
            if (append_sentences(m, &m->b, base + chunk_first + a_end,
                                 base + chunk_first + chunk_count) < 0)
                return -1;
        }
        /* truncate_seq_pair: trim the longer, front or back at random */
        const int32_t *a = as_i32(&m->a), *b = as_i32(&m->b);
        int64_t a_lo = 0, a_hi = (int64_t)count_i32(&m->a);
        int64_t b_lo = 0, b_hi = (int64_t)count_i32(&m->b);
        while ((a_hi - a_lo) + (b_hi - b_lo) > max_num_tokens) {
            int trim_a = (a_hi - a_lo) > (b_hi - b_lo);
            int front = next_double(&m->rng) < 0.5;
            if (trim_a)
                front ? a_lo++ : a_hi--;
            else
                front ? b_lo++ : b_hi--;
        }
        m->sequence.size = 0;
        if (push_i32(&m->sequence, m->cls) < 0 ||
            buffer_append(&m->sequence, a + a_lo, (size_t)(a_hi - a_lo) * sizeof(int32_t)) < 0 ||
            push_i32(&m->sequence, m->sep) < 0 ||
            buffer_append(&m->sequence, b + b_lo, (size_t)(b_hi - b_lo) * sizeof(int32_t)) < 0 ||
            push_i32(&m->sequence, m->sep) < 0)
            return -1;
        if (emit_instance(m, a_hi - a_lo + 2, random_next) < 0)
            return -1;
        chunk_count = chunk_length = 0;
    }
    return 0;
}

/* create_contiguous_instances: [CLS] contiguous sentences [SEP], no sentence B. */
static int contiguous_instances(Maker *m, Py_ssize_t document_index)
{
    int64_t document = m->document_order[document_index];
    int64_t base = m->document_start[document];
    Py_ssize_t n_sentences = document_sentences(m, document);
    int64_t max_num_tokens = m->max_seq_length - 2;
    int64_t target = target_length(m, max_num_tokens);
    m->a.size = 0;
    for (int64_t i = 0; i < n_sentences; i++) {
        if (append_sentences(m, &m->a, base + i, base + i + 1) < 0)
            return -1;
        int64_t length = (int64_t)count_i32(&m->a);
        if (!(i == n_sentences - 1 || length >= target))
            continue;
        if (length > max_num_tokens)
            length = max_num_tokens;
        m->sequence.size = 0;
        if (push_i32(&m->sequence, m->cls) < 0 ||
            buffer_append(&m->sequence, m->a.data, (size_t)length * sizeof(int32_t)) < 0 ||
            push_i32(&m->sequence, m->sep) < 0)
            return -1;
        if (emit_instance(m, length + 2, 0) < 0)
            return -1;
        m->a.size = 0;
    }
    return 0;
}

static void maker_free(Maker *m)
{
    Buffer *buffers[] = {&m->a, &m->b, &m->sequence, &m->group_positions, &m->group_start,
                         &m->group_order, &m->masked, &m->ids, &m->offsets, &m->segment_a,
                         &m->masked_positions, &m->masked_ids, &m->masked_offsets,
                         &m->random_next};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        buffer_free(buffers[i]);
    free(m->document_order);
    free(m->covered);
}

static int read_state(Twister *t, Py_buffer *words, Py_ssize_t index)
{
    if (words->len != MT_N * (Py_ssize_t)sizeof(uint32_t) || index < 0 || index > MT_N) {
        PyErr_SetString(PyExc_ValueError, "state: expected 624 uint32 words and an index in [0, 624]");
        return -1;
    }
    memcpy(t->mt, words->buf, sizeof t->mt);
    t->index = (int)index;
    return 0;
}

static PyObject *state_tuple(const Twister *t)
{
    return Py_BuildValue("(y#n)", (const char *)t->mt, (Py_ssize_t)sizeof t->mt,
                         (Py_ssize_t)t->index);
}

static int check_corpus(const Maker *m, Py_ssize_t n_sentences_plus_1, Py_ssize_t n_tokens)
{
    if (m->n_documents < 1 || m->n_documents >= ((Py_ssize_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "documents: expected between 1 and 2**31 - 1");
        return -1;
    }
    if (m->document_start[0] != 0 || m->document_start[m->n_documents] != n_sentences_plus_1 - 1) {
        PyErr_SetString(PyExc_ValueError, "document offsets do not cover the sentences");
        return -1;
    }
    for (Py_ssize_t d = 0; d < m->n_documents; d++)
        if (m->document_start[d + 1] <= m->document_start[d]) {
            PyErr_SetString(PyExc_ValueError, "every document needs at least one sentence");
            return -1;
        }
    if (m->sentence_start[0] != 0 || m->sentence_start[n_sentences_plus_1 - 1] != n_tokens) {
        PyErr_SetString(PyExc_ValueError, "sentence offsets do not cover the tokens");
        return -1;
    }
    for (Py_ssize_t s = 0; s + 1 < n_sentences_plus_1; s++)
        if (m->sentence_start[s + 1] < m->sentence_start[s]) {
            PyErr_SetString(PyExc_ValueError, "sentence offsets must not decrease");
            return -1;
        }
    if (m->n_random_words < 1 || m->n_random_words >= ((Py_ssize_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "random_words: expected at least one id");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(create_instances_doc,
"create_instances(tokens, sentence_start, document_start, random_words, continues_word,\n"
"                 state_words, state_index, max_seq_length, max_predictions_per_seq,\n"
"                 masked_lm_prob, short_seq_prob, dupe_factor, whole_word_mask, no_nsp,\n"
"                 cls, sep, mask)\n"
"-> ((state_words, state_index), ids, offsets, segment_a, masked_positions, masked_ids,\n"
"    masked_offsets, random_next, order)\n\n"
"Buffers: tokens int32, sentence_start and document_start int64 (n + 1 offsets),\n"
"random_words int32, continues_word uint8 by id. Results are bytes: int32 ids, segment_a,\n"
"masked_positions, masked_ids; int64 offsets and masked_offsets (n + 1), order (n); uint8\n"
"random_next.");

static PyObject *create_instances(PyObject *self, PyObject *args)
{
    Py_buffer tokens, sentences, documents, words, continues, state;
    Py_ssize_t state_index, dupe_factor;
    int whole_word, no_nsp, cls, sep, mask;
    Maker m;
    memset(&m, 0, sizeof m);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*nLLddnppiii", &tokens, &sentences, &documents, &words,
                          &continues, &state, &state_index, &m.max_seq_length, &m.max_predictions,
                          &m.masked_lm_prob, &m.short_seq_prob, &dupe_factor, &whole_word, &no_nsp,
                          &cls, &sep, &mask))
        return NULL;
    PyObject *result = NULL;
    m.tokens = tokens.buf;
    m.sentence_start = sentences.buf;
    m.document_start = documents.buf;
    m.n_documents = documents.len / (Py_ssize_t)sizeof(int64_t) - 1;
    m.random_words = words.buf;
    m.n_random_words = words.len / (Py_ssize_t)sizeof(int32_t);
    m.continues_word = continues.buf;
    m.vocab_size = continues.len;
    m.whole_word_mask = whole_word;
    m.no_nsp = no_nsp;
    m.cls = cls;
    m.sep = sep;
    m.mask = mask;
    if (read_state(&m.rng, &state, state_index) < 0 ||
        check_corpus(&m, sentences.len / (Py_ssize_t)sizeof(int64_t),
                     tokens.len / (Py_ssize_t)sizeof(int32_t)) < 0)
        goto done;
    /* Short targets draw randint(2, max_num_tokens): at least 2 tokens besides [CLS] and [SEP]s. */
    if (m.max_seq_length < (no_nsp ? 4 : 5) || m.max_predictions < 1 || dupe_factor < 1) {
        PyErr_SetString(PyExc_ValueError, "max_seq_length, max_predictions_per_seq or dupe_factor out of range");
        goto done;
    }
    m.document_order = malloc((size_t)m.n_documents * sizeof(int64_t));
    m.covered = malloc((size_t)m.max_seq_length);
    if (!m.document_order || !m.covered) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t d = 0; d < m.n_documents; d++)
        m.document_order[d] = d;
    shuffle_int64(&m.rng, m.document_order, m.n_documents);
    if (push_i64(&m.offsets, 0) < 0 || push_i64(&m.masked_offsets, 0) < 0)
        goto done;
    for (Py_ssize_t pass = 0; pass < dupe_factor; pass++)
        for (Py_ssize_t d = 0; d < m.n_documents; d++) {
            int failed = no_nsp ? contiguous_instances(&m, d) : instances_from_document(&m, d);
            if (failed < 0 || ((d & 4095) == 0 && PyErr_CheckSignals() < 0))
                goto done;
        }
    Py_ssize_t n_instances = (Py_ssize_t)m.random_next.size;
    if (n_instances >= ((Py_ssize_t)1 << 32)) {
        PyErr_SetString(PyExc_OverflowError, "more than 2**32 - 1 instances");
        goto done;
    }
    Buffer order = {0};
    if (buffer_reserve(&order, (size_t)n_instances * sizeof(int64_t)) < 0)
        goto done;
    order.size = (size_t)n_instances * sizeof(int64_t);
    for (Py_ssize_t i = 0; i < n_instances; i++)
        ((int64_t *)order.data)[i] = i;
    shuffle_int64(&m.rng, (int64_t *)order.data, n_instances);
    PyObject *state_out = state_tuple(&m.rng);
    if (!state_out) {
        buffer_free(&order);
        goto done;
    }
    result = Py_BuildValue("(NNNNNNNNN)", state_out, buffer_to_bytes(&m.ids),
                           buffer_to_bytes(&m.offsets), buffer_to_bytes(&m.segment_a),
                           buffer_to_bytes(&m.masked_positions), buffer_to_bytes(&m.masked_ids),
                           buffer_to_bytes(&m.masked_offsets), buffer_to_bytes(&m.random_next),
                           buffer_to_bytes(&order));
done:
    maker_free(&m);
    PyBuffer_Release(&tokens);
    PyBuffer_Release(&sentences);
    PyBuffer_Release(&documents);
    PyBuffer_Release(&words);
    PyBuffer_Release(&continues);
    PyBuffer_Release(&state);
    return result;
}

/* ------------------------------------------------------------------ CRC-32C (Castagnoli) */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ ((crc & 1u) ? 0x82f63b78u : 0u);
        crc_table[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32c(const uint8_t *data, size_t n)
{
    uint32_t crc = 0xffffffffu;
    while (n >= 8) { /* eight bytes per step through the sliced tables */
        uint64_t word;
        memcpy(&word, data, 8);
        word ^= crc; /* little-endian hosts (x86, arm64) */
        crc = crc_table[7][word & 0xff] ^ crc_table[6][(word >> 8) & 0xff] ^
              crc_table[5][(word >> 16) & 0xff] ^ crc_table[4][(word >> 24) & 0xff] ^
              crc_table[3][(word >> 32) & 0xff] ^ crc_table[2][(word >> 40) & 0xff] ^
              crc_table[1][(word >> 48) & 0xff] ^ crc_table[0][word >> 56];
        data += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *data++) & 0xff];
    return ~crc;
}

static inline uint32_t masked_crc(const uint8_t *data, size_t n)
{
    uint32_t crc = crc32c(data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ------------------------------------------------------------------ tf.train.Example */
enum { N_FEATURES = 7 };
static const char *FEATURE_NAMES[N_FEATURES] = {
    "input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
    "masked_lm_weights", "next_sentence_labels"};
enum { F_INPUT_IDS, F_INPUT_MASK, F_SEGMENT_IDS, F_POSITIONS, F_MASKED_IDS, F_WEIGHTS, F_LABEL };

static inline size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 128) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *out, uint64_t v)
{
    while (v >= 128) {
        *out++ = (uint8_t)(v | 128);
        v >>= 7;
    }
    *out++ = (uint8_t)v;
    return out;
}

static inline size_t delimited_size(size_t payload) { return 1 + varint_size(payload) + payload; }

typedef struct {
    const int32_t *ids, *segment_a, *positions, *masked_ids;
    const int64_t *offsets, *masked_offsets;
    const uint8_t *random_next;
    int64_t max_seq_length, max_predictions;
} Records;

/* Packed-varint payload sizes of the seven features of instance i. */
static void payload_sizes(const Records *r, int64_t i, size_t sizes[N_FEATURES])
{
    size_t ids = 0, positions = 0, masked = 0;
    for (int64_t k = r->offsets[i]; k < r->offsets[i + 1]; k++)
        ids += varint_size((uint32_t)r->ids[k]);
    for (int64_t k = r->masked_offsets[i]; k < r->masked_offsets[i + 1]; k++) {
        positions += varint_size((uint32_t)r->positions[k]);
        masked += varint_size((uint32_t)r->masked_ids[k]);
    }
    int64_t n = r->offsets[i + 1] - r->offsets[i];
    int64_t m = r->masked_offsets[i + 1] - r->masked_offsets[i];
    sizes[F_INPUT_IDS] = ids + (size_t)(r->max_seq_length - n);
    sizes[F_INPUT_MASK] = sizes[F_SEGMENT_IDS] = (size_t)r->max_seq_length;
    sizes[F_POSITIONS] = positions + (size_t)(r->max_predictions - m);
    sizes[F_MASKED_IDS] = masked + (size_t)(r->max_predictions - m);
    sizes[F_WEIGHTS] = 4 * (size_t)r->max_predictions;
    sizes[F_LABEL] = 1;
}

/* Sizes of one feature's layers: list = 0x0a len payload; feature = tag len list;
 * entry = 0x0a len (key, 0x12 len feature). */
static size_t entry_size(int f, size_t payload, size_t *feature_size, size_t *entry_body)
{
    size_t key = delimited_size(strlen(FEATURE_NAMES[f]));
    *feature_size = delimited_size(delimited_size(payload));
    *entry_body = key + delimited_size(*feature_size);
    return delimited_size(*entry_body);
}

static size_t example_size(const Records *r, int64_t i)
{
    size_t sizes[N_FEATURES], total = 0, feature, body;
    payload_sizes(r, i, sizes);
    for (int f = 0; f < N_FEATURES; f++)
        total += entry_size(f, sizes[f], &feature, &body);
    return delimited_size(total);
}

static uint8_t *put_zeros(uint8_t *out, int64_t n)
{
    memset(out, 0, (size_t)n);
    return out + n;
}

static uint8_t *put_payload(const Records *r, int64_t i, int f, uint8_t *out)
{
    int64_t first = r->offsets[i], n = r->offsets[i + 1] - first;
    int64_t mfirst = r->masked_offsets[i], m = r->masked_offsets[i + 1] - mfirst;
    switch (f) {
    case F_INPUT_IDS:
        for (int64_t k = 0; k < n; k++)
            out = put_varint(out, (uint32_t)r->ids[first + k]);
        return put_zeros(out, r->max_seq_length - n);
    case F_INPUT_MASK:
        memset(out, 1, (size_t)n);
        return put_zeros(out + n, r->max_seq_length - n);
    case F_SEGMENT_IDS: {
        int64_t zeros = r->segment_a[i];
        memset(out + zeros, 1, (size_t)(n - zeros));
        put_zeros(out, zeros);
        return put_zeros(out + n, r->max_seq_length - n);
    }
    case F_POSITIONS:
    case F_MASKED_IDS: {
        const int32_t *values = (f == F_POSITIONS ? r->positions : r->masked_ids) + mfirst;
        for (int64_t k = 0; k < m; k++)
            out = put_varint(out, (uint32_t)values[k]);
        return put_zeros(out, r->max_predictions - m);
    }
    case F_WEIGHTS:
        for (int64_t k = 0; k < r->max_predictions; k++) {
            float weight = k < m ? 1.0f : 0.0f; /* little-endian float32 */
            memcpy(out, &weight, 4);
            out += 4;
        }
        return out;
    default: /* F_LABEL */
        *out++ = r->random_next[i] ? 1 : 0;
        return out;
    }
}

static uint8_t *put_example(const Records *r, int64_t i, uint8_t *out)
{
    size_t sizes[N_FEATURES], feature[N_FEATURES], body[N_FEATURES], total = 0;
    payload_sizes(r, i, sizes);
    for (int f = 0; f < N_FEATURES; f++)
        total += entry_size(f, sizes[f], &feature[f], &body[f]);
    *out++ = 0x0a;
    out = put_varint(out, total);
    for (int f = 0; f < N_FEATURES; f++) {
        size_t name = strlen(FEATURE_NAMES[f]);
        *out++ = 0x0a;
        out = put_varint(out, body[f]);
        *out++ = 0x0a;
        out = put_varint(out, name);
        memcpy(out, FEATURE_NAMES[f], name);
        out += name;
        *out++ = 0x12;
        out = put_varint(out, feature[f]);
        *out++ = f == F_WEIGHTS ? 0x12 : 0x1a; /* float_list : int64_list */
        out = put_varint(out, delimited_size(sizes[f]));
        *out++ = 0x0a;
        out = put_varint(out, sizes[f]);
        out = put_payload(r, i, f, out);
    }
    return out;
}

/* One TFRecord: uint64 length, its masked CRC, the example, its masked CRC. */
static uint8_t *put_record(const Records *r, int64_t i, size_t length, uint8_t *out)
{
    uint64_t header = length;
    memcpy(out, &header, 8);
    uint32_t crc = masked_crc(out, 8);
    memcpy(out + 8, &crc, 4);
    uint8_t *example = out + 12;
    out = put_example(r, i, example);
    crc = masked_crc(example, length);
    memcpy(out, &crc, 4);
    return out + 4;
}

static int check_records(const Records *r, Py_ssize_t n_instances, const Py_buffer *b[7])
{
    /* b: ids, offsets, segment_a, positions, masked_ids, masked_offsets, random_next */
    Py_ssize_t n_ids = b[0]->len / 4, n_masked = b[3]->len / 4;
    if (b[1]->len != (n_instances + 1) * 8 || b[5]->len != (n_instances + 1) * 8 ||
        b[2]->len != n_instances * 4 || b[4]->len != b[3]->len || b[6]->len != n_instances) {
        PyErr_SetString(PyExc_ValueError, "instance buffers of inconsistent sizes");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_instances; i++) {
        int64_t n = r->offsets[i + 1] - r->offsets[i];
        int64_t m = r->masked_offsets[i + 1] - r->masked_offsets[i];
        if (r->offsets[i] < 0 || r->offsets[i + 1] > n_ids || n < 0 ||
            r->masked_offsets[i] < 0 || r->masked_offsets[i + 1] > n_masked || m < 0 ||
            r->segment_a[i] < 0 || r->segment_a[i] > n) {
            PyErr_Format(PyExc_ValueError, "instance %zd: offsets out of range", i);
            return -1;
        }
        if (n > r->max_seq_length || m > r->max_predictions) {
            PyErr_Format(PyExc_ValueError, "instance %zd: %lld tokens and %lld predictions exceed "
                         "max_seq_length %lld / max_predictions_per_seq %lld", i, (long long)n,
                         (long long)m, (long long)r->max_seq_length, (long long)r->max_predictions);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(encode_records_doc,
"encode_records(ids, offsets, segment_a, masked_positions, masked_ids, masked_offsets,\n"
"               random_next, order, max_seq_length, max_predictions_per_seq)\n"
"-> (records: bytes, ends: bytes of int64)\n\n"
"Instances order[0], order[1], ... (int64 buffer) as framed TFRecords, concatenated;\n"
"record k ends at ends[k]. Instance buffers as create_instances returns them.");

static PyObject *encode_records(PyObject *self, PyObject *args)
{
    Py_buffer ids, offsets, segment_a, positions, masked_ids, masked_offsets, random_next, order;
    Records r;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*LL", &ids, &offsets, &segment_a, &positions,
                          &masked_ids, &masked_offsets, &random_next, &order, &r.max_seq_length,
                          &r.max_predictions))
        return NULL;
    PyObject *result = NULL, *records = NULL, *ends = NULL;
    r.ids = ids.buf;
    r.offsets = offsets.buf;
    r.segment_a = segment_a.buf;
    r.positions = positions.buf;
    r.masked_ids = masked_ids.buf;
    r.masked_offsets = masked_offsets.buf;
    r.random_next = random_next.buf;
    Py_ssize_t n_instances = random_next.len, n_records = order.len / 8;
    const int64_t *which = order.buf;
    const Py_buffer *all[7] = {&ids, &offsets, &segment_a, &positions, &masked_ids,
                               &masked_offsets, &random_next};
    if (check_records(&r, n_instances, all) < 0)
        goto done;
    ends = PyBytes_FromStringAndSize(NULL, n_records * 8);
    if (!ends)
        goto done;
    int64_t *end = (int64_t *)PyBytes_AS_STRING(ends), total = 0;
    for (Py_ssize_t k = 0; k < n_records; k++) {
        if (which[k] < 0 || which[k] >= n_instances) {
            PyErr_Format(PyExc_IndexError, "order[%zd] = %lld: no such instance", k, (long long)which[k]);
            goto done;
        }
        total += 16 + (int64_t)example_size(&r, which[k]);
        end[k] = total;
    }
    records = PyBytes_FromStringAndSize(NULL, total);
    if (!records)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(records);
    Py_BEGIN_ALLOW_THREADS
    int64_t start = 0;
    for (Py_ssize_t k = 0; k < n_records; k++) {
        put_record(&r, which[k], (size_t)(end[k] - start - 16), out + start);
        start = end[k];
    }
    Py_END_ALLOW_THREADS
    result = PyTuple_Pack(2, records, ends);
done:
    Py_XDECREF(records);
    Py_XDECREF(ends);
    for (int b = 0; b < 7; b++)
        PyBuffer_Release((Py_buffer *)all[b]);
    PyBuffer_Release(&order);
    return result;
}

PyDoc_STRVAR(random_draws_doc,
"random_draws(state_words, state_index, kinds) -> (values, (state_words, state_index))\n\n"
"For self-checks against random.Random: kinds is a list of 0 (random()) or n > 0\n"
"(randbelow(n)); values are the draws, as floats and ints.");

static PyObject *random_draws(PyObject *self, PyObject *args)
{
    Py_buffer state;
    Py_ssize_t index;
    PyObject *kinds;
    Twister t;
    if (!PyArg_ParseTuple(args, "y*nO!", &state, &index, &PyList_Type, &kinds))
        return NULL;
    int failed = read_state(&t, &state, index);
    PyBuffer_Release(&state);
    if (failed)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(kinds);
    PyObject *values = PyList_New(n);
    if (!values)
        return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        unsigned long long kind = PyLong_AsUnsignedLongLong(PyList_GET_ITEM(kinds, k));
        if ((kind == (unsigned long long)-1 && PyErr_Occurred()) || kind >= (1ull << 32)) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "randbelow(n) needs n < 2**32");
            Py_DECREF(values);
            return NULL;
        }
        PyObject *value = kind ? PyLong_FromUnsignedLong(next_below(&t, kind))
                               : PyFloat_FromDouble(next_double(&t));
        if (!value) {
            Py_DECREF(values);
            return NULL;
        }
        PyList_SET_ITEM(values, k, value);
    }
    return Py_BuildValue("(NN)", values, state_tuple(&t));
}

static PyMethodDef methods[] = {
    {"create_instances", create_instances, METH_VARARGS, create_instances_doc},
    {"encode_records", encode_records, METH_VARARGS, encode_records_doc},
    {"random_draws", random_draws, METH_VARARGS, random_draws_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pretraining._native",
    "Pretraining instances and TFRecords in C (see pretraining/native.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void)
{
    crc_init();
    return PyModule_Create(&module);
}
