package wire

// ImagesCaption is the text that precedes the images of a tool result
// where a format cannot carry them inside the result (OpenAI's tool
// messages; Anthropic's results marked is_error), so the model knows
// which call they came from.
func ImagesCaption(callID, name string) string {
	if name == "" {
		return "Images from the result of call " + callID + ":"
	}
	return "Images from the result of call " + callID + " (" + name + "):"
}
