package ledger

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	abs, err := filepath.Abs("ledger.db")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		in      string
		want    Location
		wantErr string
	}{
		{name: "absolute sqlite path", in: "sqlite:///var/lib/hookkeeper/ledger.db", want: Location{Driver: SQLite, Path: "/var/lib/hookkeeper/ledger.db"}},
		{name: "relative sqlite path is made absolute", in: "sqlite://ledger.db", want: Location{Driver: SQLite, Path: abs}},
		{name: "postgres URL", in: "postgres://hk:pw@db:5432/hk?sslmode=disable", want: Location{Driver: Postgres, DSN: "postgres://hk:pw@db:5432/hk?sslmode=disable"}},
		{name: "postgresql scheme", in: "postgresql://db/hk", want: Location{Driver: Postgres, DSN: "postgresql://db/hk"}},
		{name: "no scheme", in: "/var/lib/ledger.db", wantErr: "want sqlite://<path> or postgres://<dsn>"},
		{name: "empty sqlite path", in: "sqlite://", wantErr: "sqlite needs a file path"},
		{name: "sqlite options refused", in: "sqlite://l.db?_journal=off", wantErr: "sqlite options are set by hookkeeper"},
		{name: "postgres without host", in: "postgres:///hk", wantErr: "postgres needs a URL with a host"},
		{name: "unknown scheme", in: "mysql://db/hk", wantErr: `unknown scheme "mysql"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLocation(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLocation(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseLocation(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseLocation(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestLocationNeverPrintsPasswords(t *testing.T) {
	loc, err := ParseLocation("postgres://hk:s3cr3t-pw@db:5432/hk")
	if err != nil {
		t.Fatal(err)
	}
	if s := loc.String(); strings.Contains(s, "s3cr3t-pw") {
		t.Fatalf("String() = %q leaks the password", s)
	}
	_, err = ParseLocation("mysql://hk:s3cr3t-pw@db/hk")
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Fatalf("error %v leaks the password", err)
	}
}
