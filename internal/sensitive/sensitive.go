// Package sensitive names the files whose contents loom keeps from models
// and commands: the credential stores of a user and of the system. The
// shell sandbox hides them from commands in the kernel, and the file tools
// refuse them, from this one list.
package sensitive

import "path/filepath"

// homeCredentials are the credential stores under a home directory: keys,
// cloud and registry logins, password stores.
var homeCredentials = []string{
	".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
	".config/hub", ".password-store", ".local/share/keyrings", ".netrc", ".git-credentials",
	".pgpass", ".npmrc", ".pypirc", ".my.cnf", ".vault-token", ".cargo/credentials",
	".cargo/credentials.toml", ".terraform.d/credentials.tfrc.json",
}

// systemCredentials are the system's password, sudo and host key files.
var systemCredentials = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/sudoers", "/etc/sudoers.d", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key",
	"/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
}

// Credentials returns the absolute paths of the credential stores under
// home (none when home is "" or "/") and of the system. The slice is new on
// every call; the caller owns it.
func Credentials(home string) []string {
	var out []string
	if home != "" && home != "/" {
		for _, rel := range homeCredentials {
			out = append(out, filepath.Join(home, rel))
		}
	}
	return append(out, systemCredentials...)
}
