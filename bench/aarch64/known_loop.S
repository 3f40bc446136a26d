// bench/aarch64/count.sh's check of the insn_count plugin: a program of known length.
// ldr, then ITERATIONS times subs + b.ne, then mov, mov, svc (exit): 2 * ITERATIONS + 4
// instructions executed in all. ITERATIONS comes from the command line (-DITERATIONS=N).
    .global _start
_start:
    ldr x0, =ITERATIONS
1:  subs x0, x0, #1
    b.ne 1b
    mov x0, #0
    mov x8, #93 // exit
    svc #0
