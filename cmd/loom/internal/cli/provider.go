package cli

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/loomkit/loom/internal/redact"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/openai"
)

// provider is a way to reach models: a wire format, where the API is, and
// where its key comes from.
type provider struct {
	format     string // "openai" or "anthropic"
	keyVar     string // the environment variable holding the key
	baseURLVar string // the environment variable overriding the URL, if any
	defaultURL string // the vendor's hosted API; "" for none
	needsKey   bool   // the default URL needs a key
}

// providers are the PROVIDER parts --model accepts. openai and anthropic
// are the two wire formats; the others are well-known OpenAI-compatible
// services, for convenience. Any other OpenAI-compatible server (vLLM,
// llama.cpp, LM Studio, a proxy) is openai with --base-url.
var providers = map[string]provider{
	"openai":     {format: "openai", keyVar: "OPENAI_API_KEY", baseURLVar: "OPENAI_BASE_URL", defaultURL: openai.DefaultBaseURL, needsKey: true},
	"anthropic":  {format: "anthropic", keyVar: "ANTHROPIC_API_KEY", baseURLVar: "ANTHROPIC_BASE_URL", defaultURL: anthropic.DefaultBaseURL, needsKey: true},
	"openrouter": {format: "openai", keyVar: "OPENROUTER_API_KEY", defaultURL: "https://openrouter.ai/api/v1", needsKey: true},
	"deepseek":   {format: "openai", keyVar: "DEEPSEEK_API_KEY", defaultURL: "https://api.deepseek.com/v1", needsKey: true},
	"ollama":     {format: "openai", keyVar: "OLLAMA_API_KEY", baseURLVar: "OLLAMA_BASE_URL", defaultURL: "http://localhost:11434/v1"},
}

func providerNames() string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// modelSpec is a parsed --model value.
type modelSpec struct {
	spec     string // as given: "openai:gpt-4o"
	provider string
	name     string // "gpt-4o"
	p        provider
}

func parseModel(spec string) (modelSpec, error) {
	hint := "Give --model as PROVIDER:MODEL, for example --model openai:gpt-4o or --model anthropic:claude-sonnet-4-5 (providers: " + providerNames() + ")."
	if spec == "" {
		return modelSpec{}, usagef(hint+"\nOr set LOOM_MODEL to such a value.", "no model given")
	}
	prov, name, ok := strings.Cut(spec, ":")
	prov = strings.ToLower(strings.TrimSpace(prov))
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return modelSpec{}, usagef(hint, "--model %q names no provider and model", spec)
	}
	p, ok := providers[prov]
	if !ok {
		return modelSpec{}, usagef(hint, "--model %q: unknown provider %q", spec, prov)
	}
	return modelSpec{spec: spec, provider: prov, name: name, p: p}, nil
}

// endpoint decides the base URL and the key of a model: --base-url, else
// the provider's URL variable, else its hosted API. A key is required
// only for the vendor's hosted API: a local or self-hosted server
// (Ollama, vLLM) usually needs none, and gets the key variable's value
// when it is set.
func endpoint(ms modelSpec, baseURL string, getenv func(string) string) (base, key string, err error) {
	base = baseURL
	if base == "" && ms.p.baseURLVar != "" {
		base = getenv(ms.p.baseURLVar)
	}
	if base == "" {
		base = ms.p.defaultURL
	}
	u, perr := url.Parse(base)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", usagef("Give an http or https URL, such as http://localhost:11434/v1.", "base URL %q is not an http or https URL", base)
	}
	key = getenv(ms.p.keyVar)
	if key == "" && ms.p.needsKey && sameAPI(base, ms.p.defaultURL) {
		return "", "", usagef(
			fmt.Sprintf("Set %s to your API key (export %s=...), or point --base-url at a server that needs none.", ms.p.keyVar, ms.p.keyVar),
			"%s is not set: %s needs an API key", ms.p.keyVar, ms.provider)
	}
	return strings.TrimRight(base, "/"), key, nil
}

func sameAPI(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// newModel returns the adapter for ms, whose errors red scrubs before
// they go anywhere (an error body may echo the key).
func newModel(ms modelSpec, base, key string, red *redact.Redactor) model.Model {
	var m model.Model
	if ms.p.format == "anthropic" {
		m = anthropic.New(anthropic.Config{APIKey: key, BaseURL: base, Model: ms.name})
	} else {
		m = openai.New(openai.Config{APIKey: key, BaseURL: base, Model: ms.name})
	}
	return model.ScrubErrors(red.String)(m)
}
