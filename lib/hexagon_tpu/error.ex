defmodule HexagonTpu.Error do
  @moduledoc """
  The error every `hexagon_tpu` function returns as `{:error, %HexagonTpu.Error{}}` (and the
  bang variants raise).

  `reason` is a stable atom to match on, `message` says what happened in words (naming the
  tensor, handle or path, what was expected and what was given), and `qnn_code` carries QNN's
  own error code (the low 16 bits of the `Qnn_ErrorHandle_t`) when QNN reported the failure.

  When a function returns this error and when it raises `ArgumentError` instead is the
  convention in the `HexagonTpu` moduledoc ("Arguments and errors"): wrong types raise, wrong
  values return an error. Messages quote at most 200 bytes of what the caller gave.

  Reasons:

    * `:invalid_input` - wrong input count, unknown, missing or doubly given input name (a map
      with both `"image"` and `:image`), an input key that is not a string or atom, wrong byte
      size, dtype or shape, or a term that is not a tensor; rejected before QNN is called
    * `:invalid_argument` - an argument of the right type whose value cannot work: an empty
      path (from an option, or an environment variable that is set but empty), or a path
      with a NUL byte; nothing was opened
    * `:closed` - the runtime, context or graph was closed with `close/1`
    * `:library_not_found` - a QNN library could not be opened (the message lists every path
      tried and the `dlerror`)
    * `:missing_symbol` - a library lacks the QNN bootstrap symbol
    * `:incompatible_api` - no provider in the library offers a QNN API version we support
    * `:missing_entry` - the library's function table lacks a function the runtime needs
    * `:qnn_error` - a QNN call failed; see `qnn_code`
    * `:invalid_model` - the context binary or its metadata is empty, truncated or corrupt
    * `:io` - a file could not be read (or written: `HexagonTpu.Trace.export/1`)
    * `:graph_not_found` - no graph of that name (the message lists the names)
    * `:ambiguous_graph` - the context holds several graphs and no `graph:` was given
    * `:nif_not_loaded` - the native library is missing or did not load; the message names the
      path tried and the loader's reason (see `HexagonTpu.availability/1`)
    * `:internal` - a bug in `hexagon_tpu` (a panic inside the NIF is answered this way, and
      the object stays usable); please report it
    * `:binary_newer_than_runtime`, `:wrong_backend`, `:wrong_soc`, `:wrong_htp_arch`,
      `:insufficient_vtcm` - the pre-flight verdict refused the binary before QNN was asked: the message names both sides
      and the remedy (see [`docs/preflight.md`](preflight.md))
    * `:unsupported_tensor_format`, `:unsupported_encoding` - a graph input or output has a
      layout (not dense) or a quantization encoding this package cannot size or does not know
    * `:overloaded` - the graph is busy and its queue of waiting executes is at its limit
      (`max_queued:` of `HexagonTpu.Graph.retrieve/3` and `HexagonTpu.load_model/2`)
    * `:device_reset` - the device (the DSP) was reset under the execute and recovering did
      not bring it through: the retry met another reset, creating the context again failed,
      or the context was loaded with `recover: false`; `qnn_code` is QNN's 1007 or 1011 (see
      "Device resets" in `HexagonTpu.Context.from_file/3`)
    * `:shared_buffers_unavailable` - a context loaded with `shared_buffers: true` cannot have
      shared buffers: the message says what failed (rpcmem's library, the backend's QnnMem, an
      allocation, a registration); see "Shared buffers" in `HexagonTpu.Context.from_file/3`
    * `:timeout` - no answer within the execute's `timeout:`; the answer never arrives later
    * `:exiting` - the VM is stopping: QNN is not called any more (see "Stopping the VM" in
      [Models, graphs and tensors](inference.md))
    * `:diagnosis` - from `HexagonTpu.availability/1`: a check of the doctor
      (`HexagonTpu.diagnose/1`) failed; the message is `"check: what was found; remedy"`
  """

  defexception [:reason, :message, :qnn_code]

  @type reason ::
          :invalid_input
          | :invalid_argument
          | :closed
          | :library_not_found
          | :missing_symbol
          | :incompatible_api
          | :missing_entry
          | :qnn_error
          | :invalid_model
          | :io
          | :graph_not_found
          | :ambiguous_graph
          | :nif_not_loaded
          | :internal
          | :exiting
          | :overloaded
          | :device_reset
          | :shared_buffers_unavailable
          | :timeout
          | :binary_newer_than_runtime
          | :wrong_backend
          | :wrong_soc
          | :wrong_htp_arch
          | :insufficient_vtcm
          | :unsupported_tensor_format
          | :unsupported_encoding
          | :diagnosis
          | atom()

  @type t :: %__MODULE__{
          reason: reason(),
          message: String.t(),
          qnn_code: non_neg_integer() | nil
        }

  @impl true
  def message(%__MODULE__{reason: reason, message: message, qnn_code: nil}),
    do: "(#{reason}) #{message}"

  def message(%__MODULE__{reason: reason, message: message, qnn_code: code}),
    do: "(#{reason}, QNN error #{code}) #{message}"

  @doc false
  @spec new(reason(), String.t(), non_neg_integer() | nil) :: t()
  def new(reason, message, qnn_code \\ nil) when is_atom(reason) and is_binary(message) do
    %__MODULE__{reason: reason, message: message, qnn_code: qnn_code}
  end

  @doc false
  # Unwraps `{:ok, value}` for the bang variants.
  @spec unwrap!({:ok, value} | {:error, t()}) :: value when value: term()
  def unwrap!({:ok, value}), do: value
  # An execute that returned a profile (`profile:`): both.
  def unwrap!({:ok, value, profile}), do: {value, profile}
  def unwrap!({:error, %__MODULE__{} = error}), do: raise(error)
end
