# A stand-in for the :telemetry library, compiled only where the real one is absent (the
# offline build has no Hex packages). It implements the part of the API the tests use, with
# the same semantics: handlers run in the process that emits the event. With Hex deps the
# real :telemetry is used and this file compiles to nothing.
unless Code.ensure_loaded?(:telemetry) do
  defmodule :telemetry do
    @moduledoc false

    @table :hexagon_tpu_telemetry_stand_in

    # Called from test_helper.exs: the table must outlive individual test processes.
    def start_stand_in do
      if :ets.whereis(@table) == :undefined do
        :ets.new(@table, [:named_table, :public, :bag, read_concurrency: true])
      end

      :ok
    end

    def attach(id, event, fun, config), do: attach_many(id, [event], fun, config)

    def attach_many(id, events, fun, config) when is_function(fun, 4) do
      if :ets.match_object(@table, {:_, id, :_, :_}) == [] do
        for event <- events, do: :ets.insert(@table, {event, id, fun, config})
        :ok
      else
        {:error, :already_exists}
      end
    end

    def detach(id) do
      case :ets.match_object(@table, {:_, id, :_, :_}) do
        [] ->
          {:error, :not_found}

        _ ->
          :ets.match_delete(@table, {:_, id, :_, :_})
          :ok
      end
    end

    def execute(event, measurements, metadata) do
      for {^event, id, fun, config} <- handlers(event) do
        try do
          fun.(event, measurements, metadata, config)
        catch
          # The real library detaches a failing handler.
          _, _ -> detach(id)
        end
      end

      :ok
    end

    # As telemetry 1.3's span/3: a fresh reference as `:telemetry_span_context` in every event
    # of the span, start metadata on :start and :exception, the function's own on :stop.
    def span(prefix, start_metadata, fun) do
      start = System.monotonic_time()
      context = make_ref()

      execute(
        prefix ++ [:start],
        %{monotonic_time: start, system_time: System.system_time()},
        Map.put_new(start_metadata, :telemetry_span_context, context)
      )

      try do
        fun.()
      catch
        kind, reason ->
          stop = System.monotonic_time()

          execute(
            prefix ++ [:exception],
            %{duration: stop - start, monotonic_time: stop},
            start_metadata
            |> Map.merge(%{kind: kind, reason: reason, stacktrace: __STACKTRACE__})
            |> Map.put_new(:telemetry_span_context, context)
          )

          :erlang.raise(kind, reason, __STACKTRACE__)
      else
        {result, stop_metadata} ->
          stop_event(prefix, start, %{}, stop_metadata, context)
          result

        {result, measurements, stop_metadata} ->
          stop_event(prefix, start, measurements, stop_metadata, context)
          result
      end
    end

    defp stop_event(prefix, start, measurements, metadata, context) do
      stop = System.monotonic_time()

      execute(
        prefix ++ [:stop],
        Map.merge(measurements, %{duration: stop - start, monotonic_time: stop}),
        Map.put_new(metadata, :telemetry_span_context, context)
      )
    end

    defp handlers(event) do
      if :ets.whereis(@table) == :undefined, do: [], else: :ets.lookup(@table, event)
    end
  end
end
