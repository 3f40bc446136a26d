defmodule HexagonTpu.Postprocess.Detection do
  @moduledoc """
  One box kept by `HexagonTpu.Postprocess.nms/3`, `yolov8/2` or `yolov5/2`.

    * `:box` - `{x1, y1, x2, y2}` (corners, f32 values as floats): in the boxes' own
      coordinates for `nms/3`; for the YOLO decoders in the model input's pixels, or the
      frame's after `:letterbox` (and clipped with `:clip`)
    * `:score` - its score (for YOLOv5, objectness times the class score)
    * `:class` - its class index
    * `:index` - the index of its box among the `N` inputs (to look up what else the model
      says about that box)
  """

  @enforce_keys [:box, :score, :class, :index]
  defstruct [:box, :score, :class, :index]

  @type t :: %__MODULE__{
          box: {float(), float(), float(), float()},
          score: float(),
          class: non_neg_integer(),
          index: non_neg_integer()
        }
end
