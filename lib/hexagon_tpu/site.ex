defmodule HexagonTpu.Site do
  @moduledoc false
  # The creation site of a runtime, context or graph, for the native ledger of live objects
  # (`HexagonTpu.Stats.live/0`): the first frame of the caller's stack outside this package's
  # object-creating modules, as "MyApp.Vision.init/1 (lib/my_app/vision.ex:42)".
  #
  # Taken only when an object is created (a few microseconds), never on the execute path.
  # The stack is as deep as the VM's :backtrace_depth flag (default 8) allows, and tail calls
  # leave no frame: when no outside frame is left, the outermost one seen is used.

  @internal [
    Process,
    __MODULE__,
    HexagonTpu,
    HexagonTpu.Runtime,
    HexagonTpu.Context,
    HexagonTpu.Graph
  ]

  @spec caller() :: String.t()
  def caller do
    {:current_stacktrace, frames} = Process.info(self(), :current_stacktrace)

    case Enum.drop_while(frames, fn {module, _, _, _} -> module in @internal end) do
      [frame | _] -> format(frame)
      [] when frames != [] -> format(List.last(frames))
      [] -> "unknown"
    end
  end

  defp format({module, function, arity, location}) do
    mfa = Exception.format_mfa(module, function, arity)

    case {location[:file], location[:line]} do
      {nil, _} -> mfa
      {file, nil} -> "#{mfa} (#{file})"
      {file, line} -> "#{mfa} (#{file}:#{line})"
    end
  end
end
