defmodule HexagonTpu.Native.Loader do
  @moduledoc false
  # Chooses, at compile time, how HexagonTpu.Native gets its NIF:
  #
  #   * with Hex deps (the normal case), through RustlerPrecompiled: a precompiled artifact
  #     from the GitHub release, or a local cargo build when HEXAGON_TPU_BUILD=1;
  #   * offline (HEXAGON_TPU_OFFLINE=1, or RustlerPrecompiled not available), straight from
  #     priv/native/libhexagon_tpu_nif.so with :erlang.load_nif/2.
  #
  # A macro, so that only the chosen branch is ever expanded (`use RustlerPrecompiled` cannot
  # even be expanded where the dependency is absent).
  #
  # Whichever it is, loading the NIF never fails the module load (a failing on_load stops a
  # release from booting, and leaves the module undefined in interactive mode). Each path
  # defines its own on_load function: RustlerPrecompiled's `load_rustler_precompiled/0`, a
  # forced build's `rustler_init/0` (set by Rustler's own __before_compile__), or
  # `load_offline_nif/0` below. __before_compile__ below, which runs after all of them, takes
  # that function as it is (so RustlerPrecompiled keeps choosing the target, the file and the
  # load data), and makes the module's on_load a wrapper that calls it, records a failure in
  # :persistent_term (read by load_error/0) and returns :ok. HexagonTpu.availability/1 and
  # every public function then answer {:error, %HexagonTpu.Error{reason: :nif_not_loaded}}.

  defmacro __using__(_opts) do
    offline? = System.get_env("HEXAGON_TPU_OFFLINE") in ["1", "true"]

    loader =
      if not offline? and Code.ensure_loaded?(RustlerPrecompiled) do
        precompiled()
      else
        plain_load_nif()
      end

    quote do
      unquote(loader)
      # Registered after `use RustlerPrecompiled`'s (a forced build's Rustler one): runs last.
      @before_compile HexagonTpu.Native.Loader
    end
  end

  defp precompiled do
    config = Mix.Project.config()
    version = config[:version]
    github = config[:package][:links]["GitHub"]

    quote do
      use RustlerPrecompiled,
        otp_app: :hexagon_tpu,
        crate: "hexagon_tpu_nif",
        # A mirror of the release's artifacts (air-gapped and Nerves builds, CI): the folder
        # holding the .tar.gz files. Read when hexagon_tpu compiles (guides/nerves.md, "A mirror of the
        # precompiled NIFs"); the checksums stay the package's checksum-*.exs.
        base_url:
          HexagonTpu.Native.Loader.base_url(
            System.get_env("HEXAGON_TPU_NIF_BASE_URL"),
            Application.compile_env(:hexagon_tpu, :nif_base_url),
            unquote("#{github}/releases/download/v#{version}")
          ),
        version: unquote(version),
        force_build:
          System.get_env("HEXAGON_TPU_BUILD") in ["1", "true"] or
            Application.compile_env(:rustler_precompiled, [:force_build, :hexagon_tpu], false),
        targets: ~w(aarch64-unknown-linux-gnu x86_64-unknown-linux-gnu),
        nif_versions: ["2.15"],
        # Passed to Rustler by a forced build. Only this repository's own test runs add the
        # test-support NIF: a dependency compiles in MIX_ENV=prod.
        features: unquote(test_features())
    end
  end

  @doc false
  # The NIF artifacts' folder: HEXAGON_TPU_NIF_BASE_URL, else `config :hexagon_tpu,
  # :nif_base_url`, else the GitHub release.
  @spec base_url(String.t() | nil, String.t() | nil, String.t()) :: String.t()
  def base_url(env, config, release) do
    cond do
      env not in [nil, ""] -> String.trim_trailing(env, "/")
      is_binary(config) and config != "" -> String.trim_trailing(config, "/")
      true -> release
    end
  end

  defp test_features, do: if(Mix.env() == :test, do: ["test-support"], else: [])

  defp plain_load_nif do
    quote do
      # The same shape as Rustler's attribute of that name: {otp_app, path without extension}.
      @load_from {:hexagon_tpu, "priv/native/libhexagon_tpu_nif"}
      @on_load :load_offline_nif

      @doc false
      def load_offline_nif do
        {app, path} = @load_from
        :erlang.load_nif(:filename.join(:code.lib_dir(app), path), 0)
      end
    end
  end

  @doc false
  # Refuses a truncated 64-bit little-endian ELF file (the NIF targets' format) before it is
  # opened: dlopen maps each PT_LOAD segment from the file, and touching a page past the end of
  # the file raises SIGBUS, which takes the VM down. Anything else (not ELF, too short for a
  # header, another class or byte order, an unknown path) is left to dlopen, which refuses it
  # with a message. Runs from on_load (see __on_load__ below).
  @spec check_elf(binary() | nil) :: :ok | {:error, {:truncated, charlist()}}
  def check_elf(nil), do: :ok

  def check_elf(path) do
    case :file.open(path, [:read, :raw, :binary]) do
      {:ok, file} ->
        try do
          check_elf_file(file)
        after
          :file.close(file)
        end

      {:error, _} ->
        :ok
    end
  end

  @pt_load 1

  defp check_elf_file(file) do
    with {:ok, size} <- :file.position(file, :eof),
         {:ok,
          <<0x7F, "ELF", 2, 1, _::binary-size(26), phoff::little-64, _::binary-size(14),
            phentsize::little-16, phnum::little-16>>}
         when phentsize >= 56 <- :file.pread(file, 0, 58) do
      headers =
        case :file.pread(file, phoff, phentsize * phnum) do
          {:ok, headers} -> headers
          _eof -> ""
        end

      ends =
        for <<header::binary-size(phentsize) <- headers>>,
            <<@pt_load::little-32, _::32, offset::little-64, _::binary-size(16),
              filesz::little-64, _::binary>> <- [header],
            do: offset + filesz

      last = Enum.max([0 | ends])

      cond do
        byte_size(headers) < phentsize * phnum ->
          {:error, {:truncated, ~c"the file ends inside its program headers (#{size} bytes)"}}

        last > size ->
          {:error, {:truncated, ~c"a segment ends at byte #{last}, the file has #{size}"}}

        true ->
          :ok
      end
    else
      _ -> :ok
    end
  end

  defmacro __before_compile__(env) do
    module = env.module

    inner =
      case Module.get_attribute(module, :on_load) do
        {fun, 0} ->
          fun

        other ->
          raise CompileError,
            description: "#{inspect(module)}: no NIF loader set @on_load (#{inspect(other)})"
      end

    # Where the loader looks, for the error message: RustlerPrecompiled's and Rustler's
    # attributes (should a later version rename them, the path is unknown here, and the
    # loader's reason still names it).
    nif_path =
      case Module.get_attribute(module, :rustler_precompiled_load_from) ||
             Module.get_attribute(module, :load_from) do
        {app, path} when is_atom(app) and is_binary(path) ->
          quote do
            case :code.lib_dir(unquote(app)) do
              {:error, _} -> unquote(path <> ".so")
              dir -> :filename.join(dir, unquote(path <> ".so"))
            end
          end

        _ ->
          nil
      end

    Module.delete_attribute(module, :on_load)

    quote do
      @on_load :__on_load__

      # Needs no running application: in a release's boot, on_load functions run once every
      # module of the boot script is loaded, before any application starts.
      @doc false
      def __on_load__ do
        result =
          try do
            with :ok <- HexagonTpu.Native.Loader.check_elf(nif_path()), do: unquote(inner)()
          catch
            kind, reason -> {:error, {kind, reason}}
          end

        if result == :ok do
          _ = :persistent_term.erase({__MODULE__, :load_error})
        else
          reason =
            case result do
              {:error, reason} -> reason
              other -> other
            end

          :persistent_term.put({__MODULE__, :load_error}, {nif_path(), reason})
        end

        :ok
      end

      @doc false
      # The library the loader opens (with the extension :erlang.load_nif/2 adds), nil if unknown.
      def nif_path do
        unquote(nif_path)
      catch
        _, _ -> nil
      end

      @doc false
      # nil once the NIF is loaded; otherwise {path tried (nil if unknown), what loading returned}.
      def load_error, do: :persistent_term.get({__MODULE__, :load_error}, nil)
    end
  end
end

defmodule HexagonTpu.Native do
  @moduledoc false
  # The only module that names NIFs. Rust side: native/hexagon_tpu_nif/src (runtime.rs, perf.rs,
  # context.rs, graph.rs, profile.rs, preprocess.rs, postprocess.rs, log.rs, stats.rs, trace.rs,
  # sim_probe.rs).
  #
  # Until the NIF replaces them, the stubs answer as the NIF does when it fails, so no caller
  # needs a check of its own and nothing raises: {:error, %HexagonTpu.Error{reason:
  # :nif_not_loaded}} naming the path tried and the loader's reason (see Loader above), empty
  # counters and ledger (without the NIF there is no QNN object), and `true` for closed?
  # (nothing can be open). Each answer goes through opaque/1, for the reason nif_loaded/0 reads
  # :persistent_term: Elixir 1.18+ would take a stub's literal for the function's type, and
  # warn that the callers' {:ok, _} clauses can never match.

  use HexagonTpu.Native.Loader

  alias HexagonTpu.Error

  # Answers false until the NIF is loaded. Not a literal `false`: Elixir 1.18+ infers that
  # type and flags `not Native.nif_loaded()` as always true.
  def nif_loaded, do: :persistent_term.get({__MODULE__, :nif_loaded}, false)

  # NIFs that take a `tag` answer directly, or `:queued` when the work finishes on another
  # thread (the runtime's own thread, or a busy graph's): the answer then arrives as
  # `{:hexagon_tpu_reply, tag, result}`. `call/1` hides the difference; no scheduler waits.
  def call(nif) when is_function(nif, 1) do
    tag = make_ref()
    reply(nif.(tag), tag, :infinity)
  end

  # The answer of a NIF called with `tag`: its direct answer, or the one that follows by message.
  # A queued execute answers `{:queued, ticket}`: after `timeout` ms its caller gives up with
  # the ticket, and the answer is never sent (or, sent already, taken from the mailbox).
  def reply(:queued, tag, _timeout), do: receive_reply(tag)
  def reply({:queued, ticket}, tag, timeout), do: await(tag, ticket, timeout)
  def reply(result, _tag, _timeout), do: result

  # A queued execute's caller stops waiting: `:given_up` (its answer will never be sent) or
  # `{:sent, result}` (it was, and is taken from the mailbox).
  def give_up(tag, ticket) do
    case execute_give_up(ticket) do
      :given_up -> :given_up
      :sent -> {:sent, receive_reply(tag)}
    end
  end

  defp await(tag, ticket, timeout) do
    receive do
      {:hexagon_tpu_reply, ^tag, result} -> result
    after
      timeout ->
        case give_up(tag, ticket) do
          :given_up ->
            {:error,
             Error.new(
               :timeout,
               "no answer within #{timeout} ms: the execute is skipped " <>
                 "if it had not started, its result dropped if it had"
             )}

          {:sent, result} ->
            result
        end
    end
  end

  defp receive_reply(tag) do
    receive do
      {:hexagon_tpu_reply, ^tag, result} -> result
    end
  end

  # runtime.rs; `options`: the map HexagonTpu.Runtime builds (src/protocol.rs's RuntimeArg)
  def runtime_create(_backend_lib, _system_lib, _options, _tag), do: not_loaded()

  def runtime_info(_runtime), do: not_loaded()
  def runtime_closed(_runtime), do: opaque(true)
  def runtime_close(_runtime, _tag), do: not_loaded()

  # perf.rs
  def runtime_set_performance(_runtime, _mode), do: not_loaded()
  def runtime_performance(_runtime), do: not_loaded()

  # context.rs
  def context_from_file(_runtime, _path, _max_bytes, _load_args, _tag), do: not_loaded()

  def context_from_binary(_runtime, _binary, _load_args, _tag), do: not_loaded()

  def inspect_model(_system_lib, _path, _max_bytes), do: not_loaded()
  def context_closed(_context), do: opaque(true)
  def context_close(_context, _tag), do: not_loaded()

  # graph.rs
  def graph_retrieve(_context, _name, _site), do: not_loaded()

  # `options`: the map HexagonTpu.Graph.Call builds (src/protocol.rs's ExecuteArg)
  def graph_execute(_graph, _inputs, _options, _tag), do: not_loaded()

  def execute_give_up(_ticket), do: opaque(:given_up)
  def execute_claim(_ticket), do: opaque(true)
  def graph_close(_graph, _tag), do: not_loaded()

  # profile.rs
  def graph_profile_every(_graph, _every), do: not_loaded()
  def graph_profile_table(_graph), do: not_loaded()

  # preprocess.rs: a camera frame to a model input's bytes (HexagonTpu.Preprocess builds `spec`)
  def preprocess_image(_frame, _spec), do: not_loaded()

  # postprocess.rs: top k, NMS, YOLO and SSD heads, anchors and masks (HexagonTpu.Postprocess builds the maps); the
  # `_dirty` copies run on a dirty CPU scheduler, for large inputs
  def postprocess_top_k(_scores, _k, _softmax), do: not_loaded()
  def postprocess_top_k_dirty(_scores, _k, _softmax), do: not_loaded()
  def postprocess_nms(_boxes, _scores, _args), do: not_loaded()
  def postprocess_nms_dirty(_boxes, _scores, _args), do: not_loaded()
  def postprocess_yolo(_output, _args), do: not_loaded()
  def postprocess_yolo_dirty(_output, _args), do: not_loaded()
  def postprocess_mask(_output, _args), do: not_loaded()
  def postprocess_mask_dirty(_output, _args), do: not_loaded()
  def postprocess_ssd_anchors(_options), do: not_loaded()
  def postprocess_ssd(_boxes, _scores, _anchors, _args), do: not_loaded()
  def postprocess_ssd_dirty(_boxes, _scores, _anchors, _args), do: not_loaded()

  # log.rs
  def log_forward_to(_pid), do: not_loaded()
  def log_flush(_timeout_ms), do: not_loaded()

  # stats.rs: without the NIF every counter is 0; their names are the ones
  # `HexagonTpu.Stats.native/0`'s docs describe (stats_test holds them to qnn::Counters's fields).
  def counters, do: opaque(Map.new(HexagonTpu.Stats.counter_names(), &{&1, 0}))
  def ledger_live, do: opaque([])

  # trace.rs
  def trace_start(_capacity), do: not_loaded()
  def trace_stop, do: opaque(:ok)
  def trace_info, do: opaque(%{recording: false, capacity: 0, emitted: 0, dropped: 0, held: 0})
  def trace_export, do: not_loaded()

  # sim_probe.rs: test support, in the NIF only with the cargo feature `test-support` (the test
  # builds: scripts/test.sh, and the forced build below in MIX_ENV=test). A release NIF lacks it,
  # so this stays a stub there; it exists in every build because :erlang.load_nif/2 refuses a
  # library with a function the module does not define. Test support only: they raise
  # :nif_not_loaded, which the test helpers turn into their own message.
  def qnn_sim_counters(_path), do: :erlang.nif_error(:nif_not_loaded)
  def qnn_panic_in_next_executes(_count), do: :erlang.nif_error(:nif_not_loaded)
  def qnn_sim_configure(_path, _key, _value), do: :erlang.nif_error(:nif_not_loaded)

  @doc false
  # Why the NIF is not there, as HexagonTpu.availability/1 and every public function report it.
  @spec not_loaded_error() :: Error.t()
  def not_loaded_error do
    message =
      case load_error() do
        {nil, reason} ->
          "the hexagon_tpu NIF did not load: #{inspect(reason)}"

        {path, reason} ->
          "the hexagon_tpu NIF did not load from #{path}: #{inspect(reason)}"

        nil ->
          # A stub left in place while the NIF is loaded: a library without that function.
          "the hexagon_tpu NIF is loaded but lacks this function " <>
            "(a library from another version of hexagon_tpu?)"
      end

    Error.new(:nif_not_loaded, message)
  end

  defp not_loaded, do: opaque({:error, not_loaded_error()})

  # The term itself, typed as unknown (see the top of the module). The key is never written.
  defp opaque(term), do: :persistent_term.get({__MODULE__, :opaque}, term)
end
