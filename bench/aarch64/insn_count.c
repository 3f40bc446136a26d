/*
 * insn_count.c: a QEMU TCG plugin that counts the guest instructions a program executes
 * (bench/aarch64/count.sh runs the preprocessing kernels and OpenCV under qemu-aarch64 with it).
 *
 * Each translation block, when translated, gets an inline "add this block's instruction
 * count to the counter" before its code: no callback per block or per instruction, so the
 * guest runs at near TCG speed. A block left early by a fault or a syscall still counts
 * whole: negligible for the kernels measured, and the same for every run compared.
 * The counter is one u64 shared by the guest's threads, added to without atomics (QEMU's
 * inline ADD_U64): exact for a program whose threads do not execute at the same time, as the
 * single-threaded runs measured here.
 *
 * At exit it writes the total, "insns N", to the file given as outfile=PATH (appended), or to
 * stderr:
 *   qemu-aarch64 -plugin ./libinsn_count.so,outfile=/tmp/n ./prog
 * With profile=PATH it also gives every translated block a counter of its own (the same inline
 * add, into that block's counter too) and writes one line per block at exit, "VADDR INSNS" in
 * hex and decimal: the instructions executed by the block starting at guest address VADDR (a
 * block translated again appears again). count.sh's `profile` sums them per symbol.
 *
 * QEMU's plugin API is declared here by hand (no qemu headers: Debian ships none), the subset
 * this file uses, as include/qemu/qemu-plugin.h of QEMU 7.2 (plugin API version 1, Debian 12's
 * qemu-user) declares it. Later versions of the API changed inline operations (per-vCPU
 * scoreboards) and dropped version 1; the plugin refuses to start outside the range the QEMU
 * running it reports.
 *
 * Build: gcc -O2 -shared -fPIC -fvisibility=hidden -o libinsn_count.so insn_count.c
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QEMU_PLUGIN_EXPORT __attribute__((visibility("default")))

/* --- QEMU 7.2's plugin API (include/qemu/qemu-plugin.h), the part used --- */

typedef uint64_t qemu_plugin_id_t;

typedef struct qemu_info_t {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

struct qemu_plugin_tb;

enum qemu_plugin_op {
    QEMU_PLUGIN_INLINE_ADD_U64,
};

typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op,
                                              void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

/* The API version this file is written against; QEMU refuses a plugin newer than itself. */
#define INSN_COUNT_API 1
QEMU_PLUGIN_EXPORT int qemu_plugin_version = INSN_COUNT_API;

/* --- the plugin --- */

static uint64_t insns;
static char outfile[4096];
static char profile[4096];

/* profile=: a block's counter, in a list pushed onto at translation */
struct block {
    uint64_t executed;
    uint64_t vaddr;
    struct block *next;
};
static struct block *blocks;

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &insns, n);
    if (profile[0]) {
        struct block *b = calloc(1, sizeof *b);
        if (!b) {
            return;
        }
        b->vaddr = qemu_plugin_tb_vaddr(tb);
        b->next = __atomic_load_n(&blocks, __ATOMIC_ACQUIRE);
        while (!__atomic_compare_exchange_n(&blocks, &b->next, b, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
        }
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->executed, n);
    }
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    FILE *out = outfile[0] ? fopen(outfile, "a") : NULL;
    fprintf(out ? out : stderr, "insns %" PRIu64 "\n", insns);
    if (out) {
        fclose(out);
    }
    FILE *prof = profile[0] ? fopen(profile, "w") : NULL;
    if (prof) {
        for (struct block *b = blocks; b; b = b->next) {
            if (b->executed) {
                fprintf(prof, "%" PRIx64 " %" PRIu64 "\n", b->vaddr, b->executed);
            }
        }
        fclose(prof);
    } else if (profile[0]) {
        fprintf(stderr, "insn_count: cannot write %s\n", profile);
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    if (INSN_COUNT_API < info->version.min || INSN_COUNT_API > info->version.cur) {
        fprintf(stderr, "insn_count: written for QEMU's plugin API %d, this QEMU's is %d..%d\n",
                INSN_COUNT_API, info->version.min, info->version.cur);
        return -1;
    }
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "outfile=", 8) == 0 && strlen(argv[i] + 8) < sizeof outfile) {
            strcpy(outfile, argv[i] + 8);
        } else if (strncmp(argv[i], "profile=", 8) == 0 && strlen(argv[i] + 8) < sizeof profile) {
            strcpy(profile, argv[i] + 8);
        } else {
            fprintf(stderr, "insn_count: unknown argument '%s' (outfile=PATH, profile=PATH)\n",
                    argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
