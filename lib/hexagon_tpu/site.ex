defmodule HexagonTpu.Site do
  @moduledoc false
  # The creation site of a runtime, context or graph, for the native ledger of live objects
  # (`HexagonTpu.Stats.live/0`): the caller's code that created it, as
  # "MyApp.Vision.init/1 (lib/my_app/vision.ex:42)".
  #
  # The first frame of the caller's stack that is neither in this package's modules that
  # create objects or run the caller's function (`Stats.with_leak_check/1`) nor in the
  # standard library: a module whose code was loaded from the :elixir,
  # :stdlib or :kernel application's directory, or is preloaded (Enum, Stream, Task, Kernel,
  # :lists, :proc_lib, :erlang...). Which frames the standard library puts between a
  # comprehension or an `Enum` call and the caller differs between Elixir versions (1.18 runs
  # `for` over a range through `Enum.map_range/4`); deciding by application keeps the site the
  # caller's own on every version.
  #
  # The stack the VM reports is as deep as its :backtrace_depth flag (default 8), and tail
  # calls leave no frame. When no such frame is among the reported ones:
  #
  #   1. the first such function in the full stack (`:erlang.process_info(pid, :backtrace)`,
  #      found there when the reported stack was cut short), with its module's source file,
  #      no line;
  #   2. else the function the process was started with (`:"$initial_call"`, Task's fun or a
  #      proc_lib process's init), with its module's source file, no line;
  #   3. else the first frame outside this package (a standard-library one), else the
  #      outermost frame.
  #
  # Taken only when an object is created, never on the execute path: about 10 µs, and in the
  # full-stack fallback a few hundred µs (the VM formats the whole stack as text).

  @internal [
    __MODULE__,
    HexagonTpu,
    HexagonTpu.Runtime,
    HexagonTpu.Context,
    HexagonTpu.Graph,
    HexagonTpu.Stats
  ]
  @libraries [:elixir, :stdlib, :kernel]

  # The ledger site of the runtimes `HexagonTpu.load_model/2` keeps for reuse, so the ledger
  # says what they are and `HexagonTpu.Stats` does not take them for leaks.
  @shared_prefix "HexagonTpu.load_model/2 shared runtime, opened for "

  @spec caller() :: String.t()
  def caller do
    {:current_stacktrace, frames} = :erlang.process_info(self(), :current_stacktrace)
    outside = Enum.drop_while(frames, fn {module, _, _, _} -> module in @internal end)
    libraries = library_dirs()

    case Enum.find(outside, fn {module, _, _, _} -> not library?(module, libraries) end) do
      nil -> fallback(frames, outside, libraries)
      frame -> format(frame)
    end
  end

  @doc "The site of a runtime kept by `HexagonTpu.load_model/2`, first opened at `site`."
  @spec shared_runtime(String.t()) :: String.t()
  def shared_runtime(site), do: @shared_prefix <> site

  @doc "Whether `site` is that of a runtime kept by `HexagonTpu.load_model/2`."
  @spec shared_runtime?(String.t()) :: boolean()
  def shared_runtime?(site), do: String.starts_with?(site, @shared_prefix)

  defp fallback(frames, outside, libraries) do
    deeper = Enum.find(full_stack(), &(not internal_or_library?(&1, libraries)))

    initial =
      case Process.get(:"$initial_call") do
        {_, _, _} = mfa -> if not internal_or_library?(mfa, libraries), do: mfa
        _ -> nil
      end

    cond do
      deeper -> format_without_line(deeper)
      initial -> format_without_line(initial)
      outside != [] -> format(hd(outside))
      frames != [] -> format(List.last(frames))
      true -> "unknown"
    end
  end

  defp internal_or_library?({module, _, _}, libraries),
    do: module in @internal or library?(module, libraries)

  defp library_dirs do
    for app <- @libraries, dir = :code.lib_dir(app), is_list(dir), do: dir ++ [?/]
  end

  defp library?(module, libraries) do
    case :code.which(module) do
      :preloaded -> true
      path when is_list(path) -> Enum.any?(libraries, &:lists.prefix(&1, path))
      _ -> false
    end
  end

  # Every function with a frame on the stack, innermost first: the return addresses of the
  # VM's full backtrace (not limited by :backtrace_depth), as {module, function, arity}.
  # Functions whose atoms do not parse back are left out.
  @return_addr ~r/Return addr 0x[[:xdigit:]]+ \((?:'((?:[^'\\]|\\.)+)'|([a-z][\w@]*)):(?:'((?:[^'\\]|\\.)+)'|([^\s'\/]+))\/(\d+) \+ \d+\)/

  defp full_stack do
    {:backtrace, text} = :erlang.process_info(self(), :backtrace)

    for [_, qmod, mod, qfun, fun, arity] <- Regex.scan(@return_addr, text),
        {:ok, module} <- [existing_atom(qmod <> mod)],
        {:ok, function} <- [existing_atom(qfun <> fun)],
        do: {module, function, String.to_integer(arity)}
  end

  defp existing_atom(printed) do
    {:ok, printed |> String.replace(~r/\\(.)/, "\\1") |> String.to_existing_atom()}
  rescue
    ArgumentError -> :error
  end

  defp format({module, function, arity, location}) do
    mfa = Exception.format_mfa(module, function, arity)

    case {location[:file], location[:line]} do
      {nil, _} -> mfa
      {file, nil} -> "#{mfa} (#{file})"
      {file, line} -> "#{mfa} (#{file}:#{line})"
    end
  end

  defp format_without_line({module, function, arity}) do
    mfa = Exception.format_mfa(module, function, arity)

    case source(module) do
      nil -> mfa
      file -> "#{mfa} (#{file})"
    end
  end

  defp source(module) do
    with true <- function_exported?(module, :module_info, 1),
         source when is_list(source) <- module.module_info(:compile)[:source] do
      source |> List.to_string() |> Path.relative_to_cwd()
    else
      _ -> nil
    end
  end
end
