// Client security for franz-it: SASL (PLAIN, SCRAM-SHA-256/512) and TLS (a CA to trust,
// optionally a client certificate for mTLS), taken from flags every command shares.

package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// security holds the flags of the client's security settings.
type security struct {
	mechanism string
	user      string
	password  string
	caFile    string
	certFile  string
	keyFile   string
}

func (s *security) register(fs *flag.FlagSet) {
	fs.StringVar(&s.mechanism, "sasl-mechanism", "", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default: no SASL)")
	fs.StringVar(&s.user, "sasl-user", "", "SASL user name")
	fs.StringVar(&s.password, "sasl-password", "", "SASL password")
	fs.StringVar(&s.caFile, "tls-ca", "", "PEM CA to trust; turns TLS on")
	fs.StringVar(&s.certFile, "tls-cert", "", "PEM client certificate (mTLS)")
	fs.StringVar(&s.keyFile, "tls-key", "", "PEM key of the client certificate")
}

// opts returns the kgo options for the flags given; it exits with 2 on bad usage.
func (s *security) opts() []kgo.Opt {
	var opts []kgo.Opt
	switch s.mechanism {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: s.user, Pass: s.password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: s.user, Pass: s.password}.AsSha512Mechanism()))
	default:
		fmt.Fprintf(os.Stderr, "franz-it: unknown --sasl-mechanism %q\n", s.mechanism)
		os.Exit(2)
	}
	if s.caFile == "" {
		return opts
	}
	pem, err := os.ReadFile(s.caFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-it: --tls-ca: %v\n", err)
		os.Exit(2)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fmt.Fprintf(os.Stderr, "franz-it: --tls-ca: no certificate in %s\n", s.caFile)
		os.Exit(2)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if s.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "franz-it: --tls-cert/--tls-key: %v\n", err)
			os.Exit(2)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
	return append(opts, kgo.Dialer(dialer.DialContext))
}
