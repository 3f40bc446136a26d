"""ONNX Runtime's QNN execution provider, as hexagon_tpu_compile.py compiles with it: the QAIRT
that compiles (the wheel's libQnnHtp.so or --qnn-sdk's, its build id checked against
--qairt-target), sessions that compile QDQ models into EP-context models (one shared context
for several), the child process that compiles again with QNN's log verbose (the op a graph
finalize failed on), the nodes ORT left to the CPU, and the context binary ORT wrote.
"""

import os
import sys
import tempfile

from hexagon_tpu_common import ANSI, Failure, captured_output

# The entry script, which the verbose-log child runs again (--qnn-verbose-log).
COMPILE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hexagon_tpu_compile.py")


def lib_dir():
    """The onnxruntime_qnn package directory: libQnnHtp.so and libQnnSystem.so live there."""
    import onnxruntime_qnn

    return os.path.dirname(os.path.abspath(onnxruntime_qnn.__file__))


def qairt_version(args):
    """"QAIRT 2.51.0 (onnxruntime-qnn 2.7.0)": the QNN SDK whose libraries the wheel carries, or
    the build id of the SDK library given with --backend-path. A binary needs a device runtime
    at least as new."""
    from onnxruntime_qnn import build_and_package_info as info

    if args.backend_path:
        return f"QAIRT {build_id_of(args.backend_path)} ({args.backend_path})"
    return f"QAIRT {info.qnn_version} (onnxruntime-qnn {info.__version__})"


def compiler_lib(args):
    """The libQnnHtp.so that compiles: --backend-path, or the wheel's own."""
    return args.backend_path or os.path.join(lib_dir(), "libQnnHtp.so")


def build_id_of(path):
    """The QAIRT build id a library or binary carries (hexagon_tpu_runtime.build_id)."""
    import hexagon_tpu_runtime

    found = hexagon_tpu_runtime.build_id(path)  # its Failure is the one error type
    if not found:
        raise Failure(f"{path} carries no QAIRT build id")
    return found


def check_target(found, what, args):
    """Refuses a build id newer than --qairt-target, naming both."""
    import hexagon_tpu_runtime

    if args.qairt_target and hexagon_tpu_runtime.newer_than(found, args.qairt_target):
        raise Failure(
            f"{what} is QAIRT {found}, newer than the target runtime {args.qairt_target}, which refuses "
            "binaries of a newer QAIRT: compile with --qnn-sdk PATH, a QAIRT SDK no newer than "
            f"{args.qairt_target}, or install this compiler's runtime on the device (mix hexagon_tpu.runtime)"
        )


def session_options(ctx_path, fallback, share):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "0")
    so.add_session_config_entry("ep.context_file_path", ctx_path)
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "0" if fallback else "1")
    if share:
        so.add_session_config_entry("ep.share_ep_contexts", "1")
    if share == "last":
        so.add_session_config_entry("ep.stop_share_ep_contexts", "1")
    return so


def qnn_device():
    import onnxruntime as ort
    import onnxruntime_qnn

    if "QNNExecutionProvider" not in [d.ep_name for d in ort.get_ep_devices()]:
        ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
    return [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"][:1]


def provider_options(args):
    options = {
        "htp_arch": str(args.htp_arch),
        "soc_model": str(args.soc_model),
        "offload_graph_io_quantization": "1" if args.io == "quantized" else "0",
    }
    if args.backend_path:
        # Another QAIRT's libQnnHtp.so: the EP refuses a backend of another QAIRT version
        # ("Unable to find a valid interface") unless told to skip its version check.
        options.update(backend_path=args.backend_path, skip_qnn_version_check="1")
    else:
        options["backend_type"] = "htp"
    return options


def run_sessions(models, ctx_paths, args, fallback):
    """Compiles every model (sharing one context when there are several); returns the error
    (or None) and what ORT and QNN printed."""
    import onnxruntime as ort

    share = len(models) > 1
    with captured_output(args.verbose) as log:
        try:
            for i, (model, ctx) in enumerate(zip(models, ctx_paths)):
                mode = ("last" if i == len(models) - 1 else True) if share else None
                so = session_options(ctx, fallback, mode)
                if fallback:
                    so.log_severity_level = 2  # ORT's warnings say why a node was rejected
                if args.qnn_verbose_log:
                    so.log_severity_level = 0
                so.add_provider_for_devices(qnn_device(), provider_options(args))
                ort.InferenceSession(model, so)
            error = None
        except Exception as caught:  # noqa: BLE001 - ORT raises several exception types
            error = caught
    return error, log()


def qnn_verbose_log(models, args, work):
    """QNN's log at its verbose level (where it names the op a graph finalize failed on) of
    compiling models again, filtered to its errors. QNN takes its log level once per process,
    from ORT's default logger when the EP first loads it, so this runs in a process of its own."""
    import subprocess

    argv = [sys.executable, COMPILE_SCRIPT, *models, "-o", os.path.join(work, "verbose.bin")]
    argv += ["--htp-arch", str(args.htp_arch), "--soc-model", str(args.soc_model), "--io", args.io]
    argv += ["--backend-path", args.backend_path] if args.backend_path else []
    argv += ["--qnn-verbose-log", work]
    keep = []
    with tempfile.TemporaryFile() as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
        out.seek(0)
        for raw in out:
            line = ANSI.sub("", raw.decode("utf-8", "replace").rstrip("\n"))
            if "<E>" in line or "No registered op" in line:
                keep.append(line)
    return keep


def compile_verbosely(args):
    """The child of qnn_verbose_log: the models compiled once with ORT's and QNN's logs verbose."""
    import onnxruntime as ort

    ort.set_default_logger_severity(0)  # before the EP creates its QNN log: QNN's level follows it
    args.verbose = True  # the captured lines go to stderr, for the parent to read
    ctx_paths = [os.path.join(args.qnn_verbose_log, f"verbose_{i}_ctx.onnx") for i in range(len(args.models))]
    error, _log = run_sessions(args.models, ctx_paths, args, fallback=False)
    return 1 if error is not None else 0


def cpu_nodes(ctx_path):
    """[(op_type, name)] of the nodes ORT left outside the QNN partitions in ctx_path, except
    the QuantizeLinear of a graph input and the DequantizeLinear of a graph output (graph I/O
    quantization offloaded to the host, --io quantized)."""
    import onnx

    graph = onnx.load(ctx_path, load_external_data=False).graph
    inputs = {i.name for i in graph.input}
    outputs = {o.name for o in graph.output}
    left = []
    for n in graph.node:
        io_q = n.op_type == "QuantizeLinear" and n.input[0] in inputs
        io_dq = n.op_type == "DequantizeLinear" and n.output[0] in outputs
        if n.op_type != "EPContext" and not io_q and not io_dq:
            left.append((n.op_type, n.name or "(unnamed)"))
    real = [n for n in left if n[0] not in ("QuantizeLinear", "DequantizeLinear")]
    return real or left


def context_bin(ctx_path):
    """The .bin file ORT wrote for ctx_path (the EPContext node's ep_cache_context)."""
    import onnx

    ctx = onnx.load(ctx_path, load_external_data=False)
    for node in ctx.graph.node:
        if node.op_type == "EPContext":
            for attr in node.attribute:
                if attr.name == "ep_cache_context":
                    return os.path.join(os.path.dirname(ctx_path), attr.s.decode())
    raise Failure(f"ORT wrote no EPContext node into {ctx_path}")

