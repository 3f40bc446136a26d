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

  defmacro __using__(_opts) do
    offline? = System.get_env("HEXAGON_TPU_OFFLINE") in ["1", "true"]

    if not offline? and Code.ensure_loaded?(RustlerPrecompiled) do
      precompiled()
    else
      plain_load_nif()
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
        base_url: unquote("#{github}/releases/download/v#{version}"),
        version: unquote(version),
        force_build:
          System.get_env("HEXAGON_TPU_BUILD") in ["1", "true"] or
            Application.compile_env(:rustler_precompiled, [:force_build, :hexagon_tpu], false),
        targets: ~w(aarch64-unknown-linux-gnu x86_64-unknown-linux-gnu),
        nif_versions: ["2.15"],
        # Passed to Rustler by a forced build. Only this repository's own test runs add the
        # test-support NIF: a dependency compiles in MIX_ENV=prod.
        features: unquote(test_features())

      @doc false
      def load_error, do: nil
    end
  end

  defp test_features, do: if(Mix.env() == :test, do: ["test-support"], else: [])

  defp plain_load_nif do
    quote do
      @on_load :__load_nif__

      # Never fails the module load: a missing or broken NIF is reported by
      # HexagonTpu.availability/1 instead of taking the VM down at boot.
      @doc false
      def __load_nif__ do
        result =
          case :code.priv_dir(:hexagon_tpu) do
            {:error, reason} ->
              {:error, {:priv_dir, reason}}

            priv ->
              path = :filename.join(priv, ~c"native/libhexagon_tpu_nif")
              :erlang.load_nif(path, 0)
          end

        case result do
          :ok -> :ok
          {:error, {:reload, _}} -> :ok
          {:error, reason} -> :persistent_term.put({__MODULE__, :load_error}, reason)
        end

        :ok
      end

      @doc false
      def load_error, do: :persistent_term.get({__MODULE__, :load_error}, nil)
    end
  end
end

defmodule HexagonTpu.Native do
  @moduledoc false
  # The only module that names NIFs. Stubs raise :nif_not_loaded until the NIF replaces them.
  # Rust side: native/hexagon_tpu_nif/src (runtime.rs, context.rs, graph.rs, log.rs, stats.rs).

  use HexagonTpu.Native.Loader

  # Answers false until the NIF is loaded (the only stub that does not raise). Not a literal
  # `false`: Elixir 1.18+ infers that type and flags `not Native.nif_loaded()` as always true.
  def nif_loaded, do: :persistent_term.get({__MODULE__, :nif_loaded}, false)

  # NIFs that take a `tag` answer directly, or `:queued` when the work finishes on another
  # thread (the runtime's own thread, or a busy graph's): the answer then arrives as
  # `{:hexagon_tpu_reply, tag, result}`. `call/1` hides the difference; no scheduler waits.
  def call(nif) when is_function(nif, 1) do
    tag = make_ref()

    case nif.(tag) do
      :queued ->
        receive do
          {:hexagon_tpu_reply, ^tag, result} -> result
        end

      result ->
        result
    end
  end

  # runtime.rs
  def runtime_create(_backend_lib, _system_lib, _log_level, _site, _tag), do: err()
  def runtime_info(_runtime), do: err()
  def runtime_closed(_runtime), do: err()
  def runtime_close(_runtime, _tag), do: err()

  # context.rs
  def context_from_file(_runtime, _path, _max_bytes, _site, _tag), do: err()
  def context_from_binary(_runtime, _binary, _site, _tag), do: err()
  def context_closed(_context), do: err()
  def context_close(_context, _tag), do: err()

  # graph.rs
  def graph_retrieve(_context, _name, _site), do: err()
  def graph_execute(_graph, _inputs, _input_modes, _output_modes, _tag), do: err()
  def graph_close(_graph, _tag), do: err()

  # log.rs
  def log_forward_to(_pid), do: err()

  # stats.rs
  def counters, do: err()
  def ledger_live, do: err()

  # sim_probe.rs: test support, in the NIF only with the cargo feature `test-support` (the test
  # builds: scripts/test.sh, and the forced build below in MIX_ENV=test). A release NIF lacks it,
  # so this stays a stub there; it exists in every build because :erlang.load_nif/2 refuses a
  # library with a function the module does not define.
  def qnn_sim_counters(_path), do: err()
  def qnn_panic_in_next_executes(_count), do: err()

  defp err, do: :erlang.nif_error(:nif_not_loaded)
end
