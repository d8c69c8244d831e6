package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunkCases are streamed chunks as servers send them ("The chat
// completion chunk object"), and data no chunk reader should take.
var chunkCases = []string{
	// What the API sends.
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Contoso's sales grew"},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
	`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"demo__sales_report","arguments":""}}]},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"quarter\":"}},{"index":1,"id":"call_def","function":{"name":"demo__crm","arguments":"{}"}}]}}]}`,
	`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	// Azure OpenAI's first chunk: the prompt's filter results, no choices.
	`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false}}}]}`,
	// An error in place of a chunk.
	`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`,
	`{"error":null,"choices":[{"delta":{"content":"ok"}}]}`,
	` {"error" : [1, 2.5e-3, true, false, null, {"a": {}}, []] } `,
	// Escapes, Unicode and what is not UTF-8.
	`{"choices":[{"delta":{"content":"Line\nbreak \"quoted\" tab\t slash\/ back\\ \u00e9\u4e2d \ud83d\ude00 \b\f\r"}}]}`,
	`{"choices":[{"delta":{"content":"lone \ud83d half, \udc00 low, \ud83d\u0041 mixed"}}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"bad \xff\xfe bytes \xe2\x82 cut, é ok\"}}]}",
	`{"choices":[{"delta":{"content":"\u0000nul"}}]}`,
	// Names as encoding/json matches them: folded, escaped, repeated.
	`{"Choices":[{"INDEX":0,"Delta":{"Content":"folded"},"Finish_Reason":"stop"}]}`,
	`{"choice\u0073":[{"delta":{"conten\u0074":"escaped name"}}]}`,
	`{"choices":[{"delta":{"content":"first"}}],"choices":[{"delta":{"content":"second"}}]}`,
	`{"choices":[{"index":3,"delta":{"content":"a"}},{"index":4}],"choices":[{"delta":{"tool_calls":[]}}],"choices":[{},{"finish_reason":"x"}]}`,
	`{"choices":[{"delta":{"content":"a","content":"b"},"delta":{"tool_calls":[{"id":"1"}]}}]}`,
	`{"usage":{"prompt_tokens":1},"usage":{"completion_tokens":2},"usage":null}`,
	`{"error":{"x":1},"error":"second"}`,
	// Nulls and empties.
	`null`,
	`{}`,
	`{"choices":null}`,
	`{"choices":[null,{"delta":null,"index":null,"finish_reason":null}]}`,
	`{"choices":[{"delta":{"tool_calls":null,"content":null}}]}`,
	`{"choices":[{"delta":{"tool_calls":[null,{"function":null,"index":null,"id":null}]}}]}`,
	// Numbers.
	`{"choices":[{"index":-0}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":0}}`,
	`{"choices":[{"index":1.5}]}`,
	`{"choices":[{"index":1e2}]}`,
	`{"usage":{"prompt_tokens":9223372036854775808}}`,
	`{"x":[-1,0.5,1E+2,2e-2,-0.0]}`,
	`{"x":01}`,
	`{"x":-}`,
	`{"x":1.}`,
	`{"x":1e}`,
	`{"x":.5}`,
	// Types the fields do not have.
	`{"choices":{}}`,
	`{"choices":[1]}`,
	`{"choices":[{"delta":[]}]}`,
	`{"choices":[{"delta":{"content":5}}]}`,
	`{"choices":[{"index":"0"}]}`,
	`{"choices":[{"delta":{"tool_calls":{}}}]}`,
	`{"usage":[]}`,
	`[]`,
	`"chunk"`,
	`5`,
	`true`,
	// Not JSON.
	``,
	`   `,
	`{`,
	`{"choices":[`,
	`{"choices":[{"delta":{"content":"cut`,
	`{"a":1,}`,
	`{"a":1}}`,
	`{"a":1} x`,
	`{"a" 1}`,
	`{a:1}`,
	`{"a":tru}`,
	`{"a":nul}`,
	`{"a":[1 2]}`,
	`{"a":"\x"}`,
	`{"a":"\u12G4"}`,
	"{\"a\":\"tab\there\"}",
	`{"a":"\ud83d\u12"}`,
	`[DONE]`,
}

// TestChunkDecodeReadsAsEncodingJSON checks the chunk reader against
// encoding/json: the same fields, or an error for the same data.
func TestChunkDecodeReadsAsEncodingJSON(t *testing.T) {
	for _, data := range chunkCases {
		sameAsEncodingJSON(t, []byte(data))
	}
}

// FuzzChunkDecode looks for data the chunk reader reads otherwise than
// encoding/json.
func FuzzChunkDecode(f *testing.F) {
	for _, data := range chunkCases {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsEncodingJSON(t, data)
	})
}

func sameAsEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	var want, got chatChunk
	wantErr := json.Unmarshal(data, &want)
	gotErr := got.decode(data)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%q: encoding/json says %v, decode says %v", data, wantErr, gotErr)
	}
	if wantErr != nil {
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q read otherwise than by encoding/json (-json +decode):\n%s", data, diff)
	}
}

// TestChunkDecodeErrorSaysWhere checks that a chunk that is not JSON is
// named so, with where the reader stopped.
func TestChunkDecodeErrorSaysWhere(t *testing.T) {
	var c chatChunk
	err := c.decode([]byte(`{"choices":[{"index":0,"delta":{"content":"a"}]}`))
	if err == nil || !strings.Contains(err.Error(), "offset 46") {
		t.Fatalf("error = %v, want one naming offset 46", err)
	}
}

// BenchmarkChunkDecode compares the chunk reader with encoding/json on a
// chunk of text and one of a tool call.
func BenchmarkChunkDecode(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"text", chunkCases[1]},
		{"tool_call", chunkCases[5]},
	} {
		data := []byte(bc.data)
		b.Run(bc.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var c chatChunk
				if err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/encoding_json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var c chatChunk
				if err := json.Unmarshal(data, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
