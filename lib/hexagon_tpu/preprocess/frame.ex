defmodule HexagonTpu.Preprocess.Frame do
  @moduledoc """
  A camera frame and the preprocessing pass that makes a model input of it, run by the
  execute itself: given as that input's value to `HexagonTpu.predict/3`,
  `HexagonTpu.Graph.execute/3` or `HexagonTpu.Graph.execute_async/3`, the pass writes the
  input straight into the buffer QNN reads (the context's shared buffer when it has them, the
  client buffer otherwise), so its output is never copied. Made by
  `HexagonTpu.Preprocess.frame/3`; `HexagonTpu.Preprocess.predict/3` uses one.

      {:ok, frame} = HexagonTpu.Preprocess.frame(buffer, model, width: 1280, height: 720,
                                                  pixel_format: :nv12, fit: :letterbox)
      {:ok, pending} = HexagonTpu.Graph.execute_async(model, [frame])
      # frame.transform maps the detections back to the frame
      {:ok, [boxes, scores]} = HexagonTpu.Graph.await(pending)

  Fields: `input`, the `HexagonTpu.TensorInfo` of the input it was made for (another input
  refuses it); `transform`, the `HexagonTpu.Preprocess.Transform` from the input's
  coordinates back to the frame's. The frame's bytes and the pass are the execute's.
  """

  @enforce_keys [:input, :transform, :bytes, :spec]
  defstruct @enforce_keys

  @type t :: %__MODULE__{
          input: HexagonTpu.TensorInfo.t(),
          transform: HexagonTpu.Preprocess.Transform.t(),
          bytes: binary(),
          spec: map()
        }

  defimpl Inspect do
    # the frame's bytes are megabytes: their size is enough
    def inspect(frame, _opts),
      do:
        "#HexagonTpu.Preprocess.Frame<#{byte_size(frame.bytes)} bytes for " <>
          "#{inspect(frame.input.name)}>"
  end
end
