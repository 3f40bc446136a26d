defmodule HexagonTpu.Args do
  @moduledoc false
  # Argument checking for every public function, under the convention documented in the
  # `HexagonTpu` moduledoc ("Arguments and errors"):
  #
  #   * a wrong TYPE (not a runtime/context/graph, not a path or string, options that are not a
  #     keyword list, an unknown option, an option outside its type) raises ArgumentError, with a
  #     message that names the function and the argument or option and quotes what was given;
  #   * a wrong VALUE (an empty path, a missing file, an unknown graph, bad inputs) returns
  #     `{:error, %HexagonTpu.Error{}}`.
  #
  # Every message that echoes user input goes through `quote_input/1`: at most 200 bytes of
  # it, then an ellipsis marker. (The NIF caps what it echoes the same way: src/quote.rs.)
  #
  # A function's options are a NimbleOptions schema (schema!/1), which checks their types and
  # writes their docs; options!/3 turns its errors into the messages above.

  alias HexagonTpu.Error

  @max_quoted 200
  @max_bytes_shown 50

  @doc "The most bytes of user input a message quotes."
  @spec max_quoted() :: pos_integer()
  def max_quoted, do: @max_quoted

  @doc """
  `term` as a message shows it: `inspect/1`, with at most #{@max_quoted} bytes of the input.

  A longer string shows its first #{@max_quoted} bytes (cut at a character boundary), then `…`
  and its size. A binary that is not printable UTF-8 shows as `<<...>>`, like `inspect/1`,
  with at most #{@max_bytes_shown} bytes (so a message stays readable), then `…` and its size.
  Any other term is inspected with limits and cut at #{@max_quoted} bytes, then `…`.
  """
  @spec quote_input(term()) :: String.t()
  def quote_input(binary) when is_binary(binary) do
    size = byte_size(binary)
    max = if String.printable?(binary), do: @max_quoted, else: @max_bytes_shown

    if size <= max,
      do: inspect(binary, limit: :infinity),
      else: inspect(prefix(binary, max), limit: :infinity) <> "… (#{size} bytes)"
  end

  def quote_input(term) do
    shown = inspect(term, limit: 16, printable_limit: @max_quoted)
    if byte_size(shown) <= @max_quoted, do: shown, else: prefix(shown, @max_quoted) <> "…"
  end

  # The first `max` bytes of `binary`, shortened to a whole character when `binary` is UTF-8.
  defp prefix(binary, max) do
    head = binary_part(binary, 0, max)
    if String.valid?(binary), do: whole_chars(head), else: head
  end

  defp whole_chars(head) do
    if String.valid?(head),
      do: head,
      else: whole_chars(binary_part(head, 0, byte_size(head) - 1))
  end

  @doc "Raises the ArgumentError of the convention: `fun: what must be expected, given: ...`."
  @spec type_error!(String.t(), String.t(), String.t(), term()) :: no_return()
  def type_error!(fun, what, expected, given) do
    raise ArgumentError, "#{fun}: #{what} must be #{expected}, given: #{quote_input(given)}"
  end

  @doc """
  Raises the `ArgumentError` of an integer option beyond what it can hold: `what` of `fun`
  must be at most `max` (`why`: the limit's owner).
  """
  @spec too_large!(String.t(), String.t(), pos_integer(), String.t(), term()) :: no_return()
  def too_large!(fun, what, max, why, given) do
    raise ArgumentError,
          "#{fun}: #{what} must be at most #{max} (#{why}), given: #{quote_input(given)}"
  end

  @doc """
  `value`, an integer option its schema checked (or `nil`), unless it is above `max`: then
  `too_large!/5` for the option `key`.
  """
  @spec at_most!(integer() | nil, pos_integer(), atom(), String.t(), String.t()) ::
          integer() | nil
  def at_most!(value, max, key, why, fun) when is_integer(value) and value > max,
    do: too_large!(fun, "the #{inspect(key)} option", max, why, value)

  def at_most!(value, _max, _key, _why, _fun), do: value

  @doc """
  The `:max_bytes` option of a model file's read past its schema (a positive integer or `nil`,
  the NIF's default of 2 GiB, owned by `qnn::model_file::DEFAULT_MAX_BYTES`): at most what the
  NIF holds.
  """
  @spec max_bytes!(pos_integer() | nil, String.t()) :: pos_integer() | nil
  def max_bytes!(n, fun),
    do: at_most!(n, max_u64(), :max_bytes, "bytes as an unsigned 64-bit integer", fun)

  @doc "The largest timeout `receive` takes, in milliseconds (about 49.7 days)."
  @spec max_timeout() :: pos_integer()
  def max_timeout, do: 4_294_967_295

  @doc "The largest value of the NIF's unsigned 64-bit integers."
  @spec max_u64() :: pos_integer()
  def max_u64, do: 18_446_744_073_709_551_615

  @doc """
  Checks that `opts` is a keyword list of `allowed` keys, each given once, and returns it.
  `allowed` is a list of keys, or of `{key, default}` (the defaults are added).
  """
  @spec keyword!(term(), [atom() | {atom(), term()}], String.t()) :: keyword()
  def keyword!(opts, allowed, fun) do
    unless is_list(opts) and Enum.all?(opts, &match?({key, _} when is_atom(key), &1)),
      do: type_error!(fun, "`opts`", "a keyword list", opts)

    keys =
      Enum.map(allowed, fn
        {key, _default} -> key
        key -> key
      end)

    Enum.reduce(opts, MapSet.new(), fn {key, _}, seen ->
      cond do
        key not in keys ->
          raise ArgumentError,
                "#{fun}: unknown option #{quote_input(key)}; the options are " <>
                  Enum.map_join(keys, ", ", &inspect/1)

        MapSet.member?(seen, key) ->
          raise ArgumentError, "#{fun}: the #{inspect(key)} option is given more than once"

        true ->
          MapSet.put(seen, key)
      end
    end)

    defaults = for {key, default} <- allowed, not Keyword.has_key?(opts, key), do: {key, default}
    opts ++ defaults
  end

  @doc """
  A `NimbleOptions` schema of a function's options, for `options!/3`. Every option needs a
  `:type_doc`: the message of a value outside the option's type says the option must be that
  (`the :timeout option must be a non-negative integer or :infinity`), and its docs show it.
  """
  @spec schema!(keyword()) :: NimbleOptions.t()
  def schema!(schema) do
    for {key, spec} <- schema,
        not is_binary(spec[:type_doc]),
        do: raise(ArgumentError, "the #{inspect(key)} option has no :type_doc")

    NimbleOptions.new!(schema)
  end

  @doc """
  Schema entries for options another function checks (`keys`, passed on to `owner`): known
  here, so no unknown-option error, typed `:any` and left out of the docs.
  """
  @spec checked_by([atom()], String.t()) :: keyword()
  def checked_by(keys, owner),
    do: for(key <- keys, do: {key, [type: :any, type_doc: "as #{owner} takes it", doc: false]})

  @doc """
  Checks `opts` against `schema` (made with `schema!/1`) and returns them with the defaults
  added: a keyword list of the schema's keys, each given once (`keyword!/3`'s messages), each
  value of its option's type, else `fun: the :key option must be TYPE_DOC, given: VALUE`.
  What a type cannot say (a range, a value that depends on another) the caller checks after.
  """
  @spec options!(term(), NimbleOptions.t(), String.t()) :: keyword()
  def options!(opts, %NimbleOptions{schema: schema} = compiled, fun) do
    # keyword!/3 speaks for a shape, an unknown key or a repeated one; it runs only when one
    # is wrong.
    unless Keyword.keyword?(opts) and unique_keys?(opts),
      do: keyword!(opts, Keyword.keys(schema), fun)

    case NimbleOptions.validate(opts, compiled) do
      {:ok, checked} ->
        checked

      {:error, %NimbleOptions.ValidationError{key: unknown}} when is_list(unknown) ->
        keyword!(opts, Keyword.keys(schema), fun)

      {:error, %NimbleOptions.ValidationError{key: key, value: value}} ->
        expected = Keyword.fetch!(schema, key)[:type_doc]
        type_error!(fun, "the #{inspect(key)} option", expected, value)
    end
  end

  @doc """
  `options!/3` for the options of a call made per frame or per execute (`Graph.execute/3`'s,
  `Preprocess`'s), then `finish` on them (the owner's checks past the schema and the form its
  caller reads): each process keeps the last options it had checked for `fun`, with that
  result, and a call with the same ones (a call site's literal, most often) takes it (about
  0.1 µs, against the schema's 1 to 6). Checking is pure, so the result is the same; an error
  is never kept. Options holding large data do not belong here: the process keeps them.
  """
  @spec cached_options!(term(), NimbleOptions.t(), String.t(), (keyword() -> result)) :: result
        when result: term()
  def cached_options!(opts, %NimbleOptions{} = compiled, fun, finish \\ &Function.identity/1) do
    case Process.get({__MODULE__, fun}) do
      {^compiled, ^opts, checked} ->
        checked

      _ ->
        checked = opts |> options!(compiled, fun) |> finish.()
        Process.put({__MODULE__, fun}, {compiled, opts, checked})
        checked
    end
  end

  defp unique_keys?([]), do: true
  defp unique_keys?([_]), do: true
  defp unique_keys?(opts), do: map_size(Map.new(opts)) == length(opts)

  @doc "A number in `[min, max]`, as a `NimbleOptions` `{:custom, Args, :number_in, [min, max]}` type."
  @spec number_in(term(), number(), number()) :: {:ok, number()} | {:error, String.t()}
  def number_in(value, min, max) when is_number(value) and value >= min and value <= max,
    do: {:ok, value}

  def number_in(_value, min, max), do: {:error, "not a number in [#{min}, #{max}]"}

  @doc "A number above 0, as a `NimbleOptions` `{:custom, Args, :positive_number, []}` type."
  @spec positive_number(term()) :: {:ok, number()} | {:error, String.t()}
  def positive_number(value) when is_number(value) and value > 0, do: {:ok, value}
  def positive_number(_value), do: {:error, "not a positive number"}

  @doc "A list of numbers above 0, as a `NimbleOptions` custom type."
  @spec positive_numbers(term()) :: {:ok, [number()]} | {:error, String.t()}
  def positive_numbers(list) do
    if is_list(list) and Enum.all?(list, &(is_number(&1) and &1 > 0)),
      do: {:ok, list},
      else: {:error, "not a list of positive numbers"}
  end

  @doc "A non-empty list of positive integers, as a `NimbleOptions` custom type."
  @spec positive_integers(term()) :: {:ok, [pos_integer()]} | {:error, String.t()}
  def positive_integers(list) do
    if is_list(list) and list != [] and Enum.all?(list, &(is_integer(&1) and &1 > 0)),
      do: {:ok, list},
      else: {:error, "not a non-empty list of positive integers"}
  end

  @doc """
  A path argument as the binary the NIF takes: a binary (any bytes: Linux paths need not be
  UTF-8) or a charlist/chardata. Raises for anything else.
  """
  @spec path!(term(), String.t(), String.t()) :: binary()
  def path!(path, what, fun) do
    case path(path) do
      {:ok, binary} -> binary
      {:error, _} -> type_error!(fun, what, path_type(), path)
    end
  end

  @doc "What a path must be, as `path!/3`'s message says: the `:type_doc` of a path option."
  @spec path_type() :: String.t()
  def path_type, do: "a path (a binary or a charlist)"

  @doc "A path as `path!/3` takes it; also a `NimbleOptions` `{:custom, Args, :path, []}` type."
  @spec path(term()) :: {:ok, binary()} | {:error, String.t()}
  def path(path) when is_binary(path), do: {:ok, path}

  def path(path) when is_list(path) do
    {:ok, IO.chardata_to_string(path)}
  rescue
    _ in [ArgumentError, UnicodeConversionError] -> {:error, path_type()}
  end

  def path(_path), do: {:error, path_type()}

  @doc """
  `:ok`, or the `:invalid_argument` error for a path that cannot name a file: an empty one
  (`dlopen("")` opens the VM's own executable) or one with a NUL byte.
  """
  @spec check_path(binary(), String.t()) :: :ok | {:error, Error.t()}
  def check_path("", what), do: invalid_argument("#{what} is empty; expected the path of a file")

  def check_path(path, what) do
    case :binary.match(path, <<0>>) do
      :nomatch ->
        :ok

      {at, _} ->
        invalid_argument("#{what} contains a NUL byte (at byte #{at}): #{quote_input(path)}")
    end
  end

  @doc """
  `value` when it is a `module` struct holding a NIF reference (a runtime, context or graph);
  raises otherwise.
  """
  @spec handle!(term(), module(), String.t(), String.t()) :: struct()
  def handle!(%{__struct__: module, ref: ref} = value, module, _what, _fun)
      when is_reference(ref),
      do: value

  def handle!(value, module, what, fun), do: type_error!(fun, what, "a #{inspect(module)}", value)

  @doc "A graph name, or a `graph:` option: a UTF-8 binary. Raises for anything else."
  @spec name!(term(), String.t(), String.t()) :: String.t()
  def name!(name, what, fun) do
    if is_binary(name) and String.valid?(name),
      do: name,
      else: type_error!(fun, what, "a string (a graph name, UTF-8)", name)
  end

  @doc "An `{:error, %HexagonTpu.Error{reason: :invalid_argument}}`."
  @spec invalid_argument(String.t()) :: {:error, Error.t()}
  def invalid_argument(message), do: {:error, Error.new(:invalid_argument, message)}

  @doc "An `{:error, %HexagonTpu.Error{reason: :invalid_input}}`: inputs that do not fit the model."
  @spec invalid_input(String.t()) :: {:error, Error.t()}
  def invalid_input(message), do: {:error, Error.new(:invalid_input, message)}
end
