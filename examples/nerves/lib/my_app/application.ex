defmodule MyApp.Application do
  # A Nerves application serving a model on the Hexagon NPU (examples/nerves/README.md): the
  # Monitor, and an Nx.Serving of a context binary, named MyApp.Classifier:
  #
  #     [logits, probabilities] = Nx.Serving.batched_run(MyApp.Classifier, images)
  #
  # Configured in config/target.exs:
  #
  #     config :my_app, :classifier, model: "/data/classifier.bin"
  #
  # Beside `:model`, any option of HexagonTpu.Serving.new/2 (`partitions:`, `lib_path:`, ...).
  # Without that key the application starts without the serving.
  @moduledoc false

  use Application

  require Logger

  # Right after boot the DSP can still be starting, and the first load then fails with a QNN
  # error: such a load is tried again, this many times, this far apart. Other errors (no such
  # file, a binary for another runtime) are final at once.
  @load_tries 5
  @load_retry_ms 2_000

  @impl true
  def start(_type, _args) do
    children =
      [
        # Samples HexagonTpu.Stats every 30 s: [:hexagon_tpu, :monitor, :stats] events, and
        # warnings when QNN resources keep growing or the dirty schedulers stay saturated.
        {HexagonTpu.Monitor, interval_ms: 30_000}
      ] ++ classifier(Application.get_env(:my_app, :classifier))

    Supervisor.start_link(children, strategy: :one_for_one, name: MyApp.Supervisor)
  end

  defp classifier(nil), do: []

  defp classifier(opts),
    do: [%{id: MyApp.Classifier, start: {__MODULE__, :start_classifier, [opts]}}]

  @doc false
  # The serving's start: the model loaded (the binary is checked and loaded now, so a binary
  # that cannot load is reported here), then Nx.Serving started with it. A model that does not
  # load leaves the firmware running without the serving (:ignore) rather than stopping the
  # VM, which on Nerves reboots the board; the error says why.
  def start_classifier(opts) do
    {model, serving_opts} = Keyword.pop!(opts, :model)

    case load(model, serving_opts, @load_tries) do
      {:ok, serving} ->
        Nx.Serving.start_link(serving: serving, name: MyApp.Classifier, batch_timeout: 20)

      {:error, error} ->
        Logger.error("MyApp.Classifier not started: #{Exception.message(error)}")
        :ignore
    end
  end

  defp load(model, opts, tries) do
    case HexagonTpu.Serving.new(model, opts) do
      {:error, %HexagonTpu.Error{reason: reason} = error}
      when reason in [:qnn_error, :device_reset] and tries > 1 ->
        Logger.warning("loading #{model} failed, trying again: #{Exception.message(error)}")
        Process.sleep(@load_retry_ms)
        load(model, opts, tries - 1)

      result ->
        result
    end
  end
end
