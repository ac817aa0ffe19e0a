package shell

import (
	"net/url"
	"slices"
	"strings"
)

// credentialWords are the parts of a variable name (split at "_") that
// mark it as a credential: OPENAI_API_KEY, GITHUB_TOKEN, DB_PASSWORD,
// SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS.
var credentialWords = []string{
	"KEY", "APIKEY", "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE",
	"CREDENTIAL", "CREDENTIALS", "AUTH", "COOKIE", "PAT", "PRIVATE", "SIGNING",
}

// credentialPrefixes name whole families of credentials: cloud accounts and
// model providers.
var credentialPrefixes = []string{
	"AWS_", "AZURE_", "ARM_CLIENT", "GCP_", "GOOGLE_", "CLOUDSDK_", "OPENAI_", "ANTHROPIC_",
	"GEMINI_", "MISTRAL_", "GROQ_", "DEEPSEEK_", "OPENROUTER_", "COHERE_", "HF_", "HUGGINGFACE_",
	"VAULT_", "DIGITALOCEAN_", "HEROKU_", "NETLIFY_", "VERCEL_", "CLOUDFLARE_", "STRIPE_", "TWILIO_",
	"SLACK_", "DISCORD_", "NPM_CONFIG__AUTH", "LOOM_",
}

// IsCredential reports whether the environment variable name=value looks
// like it carries a credential: its name has a part such as KEY, TOKEN,
// SECRET, PASSWORD or AUTH (matched per "_"-separated part, so
// GIT_AUTHOR_NAME is not one), starts with the prefix of a cloud or model
// provider (AWS_, OPENAI_, ANTHROPIC_, ...), or its value is a URL with a
// password in it (DATABASE_URL=postgres://u:p@h/db).
func IsCredential(name, value string) bool {
	upper := strings.ToUpper(name)
	for _, p := range credentialPrefixes {
		if strings.HasPrefix(upper, p) {
			return true
		}
	}
	for _, part := range strings.Split(upper, "_") {
		if slices.Contains(credentialWords, part) {
			return true
		}
		for _, w := range []string{"APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD"} {
			if strings.HasSuffix(part, w) || strings.HasPrefix(part, w) {
				return true // GHTOKEN, ACCESSTOKEN, DBPASSWORD
			}
		}
	}
	if strings.Contains(value, "://") {
		if u, err := url.Parse(value); err == nil && u.User != nil {
			if _, ok := u.User.Password(); ok {
				return true
			}
		}
	}
	return false
}

// ScrubEnv returns the variables of env (in "NAME=value" form) that are
// not credentials (see [IsCredential]), keeping the names in keep whatever
// they look like. env is not modified.
func ScrubEnv(env []string, keep []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name == "" {
			continue
		}
		if slices.Contains(keep, name) || !IsCredential(name, value) {
			out = append(out, kv)
		}
	}
	return out
}

// setEnv returns env with name set to value, replacing earlier settings.
func setEnv(env []string, name, value string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return append(out, name+"="+value)
}
