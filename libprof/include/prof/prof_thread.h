/* libprof: the runtime's per-thread state, shared with the inline fast paths of the macros in
 * prof/prof.hpp. Internal ABI, not an API: the header and the library always come from the same
 * build, and the fields change with the library's version.
 *
 * Why it is public: a PROF_LINE or PROF_SCOPE that calls into the library costs two calls
 * (about 5 ns here), as much as the cycle-counter reads it surrounds. The macros instead add a
 * line's hit to the thread's counters, and write a scope's enter and exit records into the
 * thread's mapped chunk, inline; anything unusual (the first hit of a site on a thread, a full
 * chunk, a busy or stopped thread) takes the out-of-line path in the library. */
#ifndef PROF_PROF_THREAD_H
#define PROF_PROF_THREAD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A chunk of the trace file being filled by one stream (trace format: docs/trace-format.md). */
typedef struct prof_chunk_writer {
    uint8_t* base;       /* mapped chunk, chunk header first; null before the first chunk */
    uint8_t* cursor;     /* the next record goes here */
    uint8_t* end;        /* one past the chunk */
    uint64_t last_ticks; /* time of the previous timed record (deltas are relative to it) */
    uint64_t last_ptr;   /* previous pointer of a memory record in this chunk (delta base) */
    /* The two chunks this stream filled last, still mapped: an inline fast path that a signal
     * handler interrupted between its check of `seq` and its in-place write (PROF_LINE's
     * LineCounts) writes into a chunk that is retired but mapped, so its hit is counted there. */
    uint8_t* retired[2];
    /* Chunks that hold records the stream adds to in place until it ends (format 1.9
     * CallCounts): mapped until then, whatever else retires. `keep`: the current one does. */
    uint8_t** kept;
    uint32_t kept_count, kept_cap;
    uint32_t keep;
    uint32_t stream;
    uint32_t seq;
    uint32_t tid;
    uint16_t kind;
} prof_chunk_writer;

/* One open frame of the thread's shadow call stack. */
typedef struct prof_frame {
    uintptr_t fn;   /* function address, or the prof_site of a scope */
    uintptr_t site; /* return address into the caller; PROF_DETAIL_SCOPE_MARK for a scope */
    uintptr_t cfa;  /* stack level at entry: matches an exit to its frame */
    /* A counting thread's (PROF_TIME=sampled): the frame's node in the thread's call tree, and
     * whether the call is being timed (its latency distribution: the runtime keeps its start). */
    uint32_t node;
    uint32_t timed;
} prof_frame;

struct prof_tree_node; /* a node of a counting thread's call tree (the runtime's, private) */
struct prof_path_slot; /* its table from (parent node, function) to node (private) */

/* What one thread's activity at one marked site adds up to, by site id. */
typedef struct prof_site_counts {
    /* PROF_LINE executions that measured memory, and their cycles (the others are in
     * `counter`) */
    uint64_t hits, ticks;
    uint64_t rss_reads, rss_last; /* of `hits`, those that read the RSS (PROF_LINE_RSS=1) */
    int64_t rss_increment;        /* bytes, summed over the reads */
    int64_t heap_increment;       /* usable heap bytes, summed over `hits` */
    uint32_t scope_index;   /* a scope site: its stream-local function index + 1, 0 = none */
    /* The site's LineCounts record (format 1.3) in the thread's current chunk: its hits and
     * ticks fields (u64 each, unaligned), added to in place while `counter_seq` is the
     * writer's `seq` (the chunk is still the thread's). A PROF_LINE hit then costs no record,
     * and a process killed at any time keeps its counts. */
    uint32_t counter_seq;
    uint8_t* counter;
    /* PROF_LINE's clock reads, taken around one hit in PROF_LINE_CLOCK_EVERY once the site's
     * timed hits are short (prof_line_plan): the hits left untimed before the next timed one,
     * and how many more hits that one's duration stands for (0: itself alone). */
    uint32_t clock_skip;
    uint32_t clock_extra;
    uint32_t clock_timed; /* timed hits so far: the first ones are all timed */
} prof_site_counts;

struct prof_slot; /* the runtime's function table (private) */

typedef struct prof_thread {
    prof_chunk_writer w;
    prof_frame* frames;
    uint32_t depth;
    uint32_t max_depth;
    struct prof_slot* table;
    uint32_t mask; /* table size - 1, or 0 before the table exists */
    uint32_t used;
    uint32_t next_index;
    uint32_t overflow;       /* frames entered beyond max_depth and not yet exited */
    uint64_t dropped;        /* events not recorded (depth limit); reported at thread end */
    uintptr_t overflow_cfa;  /* stack level of the outermost of those frames */
    prof_site_counts* sites; /* by site id; `site_cap` entries */
    uint32_t site_cap;
    /* Memory profiler: deduplicated unwound stacks of this stream. */
    uint32_t stack_mask;
    uint64_t* stack_keys; /* hash of the return addresses, 0 = empty slot */
    uint32_t* stack_ids;
    uint32_t stack_count;
    uintptr_t stack_top; /* highest address of this thread's stack, bounds the unwinder */
    uint64_t next_rss_ticks;
    int64_t heap_bytes; /* usable bytes allocated minus released by this thread */
    uint8_t state;      /* PROF_DETAIL_THREAD_ACTIVE while the fast paths may record */
    /* The thread counts its calls in a call tree instead of writing call records (format 1.9):
     * its frames are marked apart (a scope's site is not PROF_DETAIL_SCOPE_MARK), so that no
     * inline fast path writes a record of a call. */
    uint8_t counting;
    /* Set by the thread's sampler (PROF_TIME=auto): the process has samples enough, the thread's
     * next hook begins counting. */
    uint8_t count_soon;
    /* The runtime's own work is under way on this thread (its start, a fork, its finish): a
     * hook that fires meanwhile (the C library calling the program's malloc for the runtime)
     * is the profiler's call, not the program's: neither recorded nor counted as dropped. */
    uint8_t own_work;
    /* Runs of scope activations (format 1.3 ScopeRun): consecutive leaf activations of one
     * scope at one depth add to one record, updated in place in the chunk. */
    uint8_t* run_end;         /* end of the run record that the next activation may join */
    uint8_t* run_fields;      /* its count and ticks (u64 each, unaligned) */
    uint64_t run_key;         /* its scope's function index << 32 | its activations' parent depth */
    uint64_t defer_ticks;     /* start of the activation joining the run (state DEFERRED) */
    uint8_t* leaf_pos;        /* the latest inline Enter record (then its Enter/Exit pair) */
    uint8_t* leaf_end;        /* its end: while it is the last record, its scope is a leaf */
    uint64_t leaf_key;        /* index << 32 | the pair's parent depth (~0: only the Enter yet) */
    uint64_t leaf_prev_ticks; /* the time chain before that Enter */
    uint64_t leaf_start;      /* the pair's Enter time */
    uint64_t leaf_ticks;      /* the pair's duration */
    /* Threads with a stream, linked under the runtime's lock: the finish collects the line
     * sums of threads still running. */
    struct prof_thread* live_prev;
    struct prof_thread* live_next;
    /* PROF_TIME=sampled: the rseq_cs word of the thread's rseq area, which the kernel clears
     * when the thread was off CPU; null when the hooks read the clock per call. */
    uint64_t* switch_word;
    /* Set when the hooks read the clock after a switch: their record is preceded by the
     * thread's clocks (a Sample record of count 0). */
    uint8_t switch_read;
    /* A counting thread's call tree: its nodes (0 is the root), and its table of paths. */
    struct prof_tree_node* tree_nodes;
    struct prof_path_slot* tree_paths;
    uint32_t tree_path_mask;
    /* The rseq_cs word of the thread's rseq area (null: none registered), for switch_word. */
    uint64_t* switch_area;
    /* Which hits of a short PROF_LINE are timed: a xorshift state (0 until the first plan). */
    uint64_t clock_rng;
} prof_thread;

/* Zero-initialised, no constructor: reading it costs one %fs-relative load. */
extern __thread prof_thread prof_tls __attribute__((tls_model("initial-exec")));

/* A timed PROF_LINE hit of `ticks` on a site that samples its clock reads, or whose hits this
 * short may start to: sets which hit is timed next (`clock_skip`, `clock_extra`). */
void prof_line_plan(prof_site_counts* counts, unsigned long long ticks);
/* Hits shorter than this many ticks (ten clock reads) may have their clock read sampled; 0
 * (PROF_LINE_CLOCK_EVERY=1, or no TSC): every hit is timed. */
extern unsigned long long prof_line_short_ticks;
/* After a timed hit of `ticks` that counted `weight` times: the next timed hit is chosen again
 * when this one was short or stood for others (a long hit of a site timing every hit: nothing
 * to change, no call). */
static inline void prof_line_timed(prof_site_counts* counts, unsigned long long ticks,
                                   unsigned weight) {
    if (__builtin_expect(ticks < prof_line_short_ticks || weight > 1, 0))
        prof_line_plan(counts, ticks);
}

/* The values the fast paths rely on; the runtime checks them against its own at compile time. */
#define PROF_DETAIL_THREAD_ACTIVE 1
#define PROF_DETAIL_THREAD_BUSY 2
#define PROF_DETAIL_THREAD_DEFERRED 5 /* active, a scope activation joining a run is open */
#define PROF_DETAIL_SCOPE_MARK 1
#define PROF_DETAIL_TAG_ENTER 0x01
#define PROF_DETAIL_TAG_EXIT 0x02
#define PROF_DETAIL_TAG_SCOPE_RUN 0x49
#define PROF_DETAIL_TAG_LINE_COUNTS 0x4a
#define PROF_DETAIL_CHUNK_HEADER 64 /* bytes before a chunk's records */
#define PROF_DETAIL_CHUNK_USED 16   /* offset of the chunk header's `used` (u32) */
#define PROF_DETAIL_RECORD_ROOM 57  /* bytes a fast path needs left: three event records */

#ifdef __cplusplus
}
#endif

#endif /* PROF_PROF_THREAD_H */
