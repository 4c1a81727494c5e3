package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer collects stderr of run, which its goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-orders", "120", "-rate", "200", "-username", "u", "-password", "p",
			"-login-style", "camel", "-status-style", "string", "-items-per-page", "7", "-route-limit", "30", "-v"}, outW, &stderr)
		outW.Close()
	}()

	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v (stderr %s)", err, stderr.String())
	}
	m := regexp.MustCompile(`^plentysim: serving (http://127\.0\.0\.1:\d+) username=u password=p orders=120\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first line %q", line)
	}
	go io.Copy(io.Discard, outR)
	base := m[1]

	resp, err := http.Post(base+"/rest/login", "application/json", strings.NewReader(`{"username":"u","password":"p"}`))
	if err != nil {
		t.Fatal(err)
	}
	var tk struct{ AccessToken string }
	err = json.NewDecoder(resp.Body).Decode(&tk)
	resp.Body.Close()
	if err != nil || tk.AccessToken == "" {
		t.Fatalf("camelCase login: %v %+v", err, tk)
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/rest/orders/search?sortOrder=asc", nil)
	req.Header.Set("Authorization", "Bearer "+tk.AccessToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		TotalsCount, ItemsPerPage int
		Entries                   []struct{ StatusID json.RawMessage }
	}
	err = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	if err != nil || page.TotalsCount < 120 || page.ItemsPerPage != 7 || len(page.Entries) != 7 || page.Entries[0].StatusID[0] != '"' {
		t.Fatalf("search: %v %+v", err, page)
	}
	if resp.Header.Get("X-Plenty-Route-Limit") != "30" {
		t.Errorf("route limit header %q", resp.Header.Get("X-Plenty-Route-Limit"))
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d, stderr %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if s := stderr.String(); !strings.Contains(s, "msg=request") || !strings.Contains(s, "path=/rest/orders/search") {
		t.Errorf("-v logged no requests: %s", s)
	}
}

func TestRunFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "usage: plentysim"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"-login-style", "kebab"}, 2, "login style"},
		{[]string{"-status-style", "float"}, 2, "status style"},
		{[]string{"-fault-html", "1.5"}, 2, "HTMLRate"},
		{[]string{"-statuses", "5,x"}, 2, `status "x"`},
		{[]string{"-location", "Mars/Olympus"}, 2, "-location"},
		{[]string{"-orders", "-1"}, 2, "negative"},
		{[]string{"extra"}, 2, "unexpected arguments"},
		{[]string{"-addr", "256.0.0.1:0", "-orders", "0", "-rate", "0"}, 1, "256.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr syncBuffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit code %d, want %d", code, tt.code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.want)
			}
		})
	}
}

// TestRunServesManyShops: -shops N prints one base URL per shop; each
// answers with its own orders and sessions; the plain /rest path is not
// served then.
func TestRunServesManyShops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-shops", "3", "-orders", "5", "-rate", "0"}, outW, &stderr)
		outW.Close()
	}()
	rd := bufio.NewReader(outR)
	head, err := rd.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "plentysim: serving 3 shops on http://127.0.0.1:") {
		t.Fatalf("first line %q %v (stderr %s)", head, err, stderr.String())
	}
	var bases []string
	for i := range 3 {
		line, err := rd.ReadString('\n')
		m := regexp.MustCompile(`^shop (shop-00\d) (http://127\.0\.0\.1:\d+/shops/shop-00\d)\n$`).FindStringSubmatch(line)
		if err != nil || m == nil || m[1] != fmt.Sprintf("shop-%03d", i+1) {
			t.Fatalf("shop line %d: %q %v", i, line, err)
		}
		bases = append(bases, m[2])
	}
	go io.Copy(io.Discard, outR)
	for _, base := range bases {
		resp, err := http.Post(base+"/rest/login", "application/json", strings.NewReader(`{"username":"demo","password":"demo"}`))
		if err != nil {
			t.Fatal(err)
		}
		var tk struct {
			AccessToken string `json:"access_token"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&tk)
		resp.Body.Close()
		req, _ := http.NewRequest(http.MethodGet, base+"/rest/orders/search", nil)
		req.Header.Set("Authorization", "Bearer "+tk.AccessToken)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ TotalsCount int }
		_ = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || page.TotalsCount != 5 {
			t.Errorf("%s: %d, %d orders, want 200 and its 5", base, resp.StatusCode, page.TotalsCount)
		}
	}
	root := strings.TrimSuffix(bases[0], "/shops/shop-001")
	resp, err := http.Post(root+"/rest/login", "application/json", strings.NewReader(`{"username":"demo","password":"demo"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/rest/login with -shops: %d, want 404", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
}
