defmodule HexagonTpu.Test.BlazeFace do
  @moduledoc false
  # BlazeFace's two outputs ({1, 896, 16} boxes and keypoints, {1, 896, 1} scores) decoded
  # as MediaPipe's face_detection_short_range graph does: Postprocess.ssd_options/1's.

  alias HexagonTpu.Postprocess

  def anchors, do: decode_options()[:anchors]

  def decode_options(overrides \\ []),
    do: Keyword.merge(Postprocess.ssd_options(:face_detection_short_range), overrides)

  @doc "The faces in BlazeFace's outputs, given as a map of shape to f32 binary."
  def faces!(by_shape, overrides \\ []) do
    Postprocess.ssd!(
      {by_shape[{1, 896, 16}], {1, 896, 16}},
      {by_shape[{1, 896, 1}], {1, 896, 1}},
      decode_options(overrides)
    )
  end
end
