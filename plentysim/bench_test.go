package plentysim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchSim is a simulator holding n generated orders, without limits that a
// benchmark could reach.
func benchSim(b *testing.B, n int) (*Server, string) {
	b.Helper()
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	sim := New(Config{Now: func() time.Time { return now }, Limits: Limits{ShortLimit: 1 << 40, LongLimit: 1 << 40}})
	sim.Generate(n, now.Add(-30*24*time.Hour), now)
	window := "updatedAt=between:" + strings.ReplaceAll(now.Add(-31*24*time.Hour).Format(time.RFC3339)+","+now.Format(time.RFC3339), "+", "%2B")
	return sim, "sortBy=orderId&sortOrder=asc&itemsPerPage=250&orderTypeId=in:1,2,3,4,5&" + window
}

// BenchmarkSearchHTTP pages through 100,000 orders over real HTTP, 250 per
// page, with the filters of a sweep.
func BenchmarkSearchHTTP(b *testing.B) {
	sim, query := benchSim(b, 100_000)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	resp, err := http.Post(srv.URL+PathLogin, "application/json", strings.NewReader(`{"username":"demo","password":"demo"}`))
	if err != nil {
		b.Fatal(err)
	}
	tok := decodeTokensB(b, resp)
	b.ReportAllocs()
	entries, bytes := 0, 0
	for i := 0; b.Loop(); i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+PathSearch+"?"+query+"&page="+strconv.Itoa(1+i%400), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := srv.Client().Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
		entries += 250
		bytes += len(body)
	}
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "orders/s")
	b.SetBytes(int64(bytes / max(b.N, 1)))
}

// BenchmarkRenderPage measures filtering and rendering one page of 250 out
// of 100,000 orders, without HTTP.
func BenchmarkRenderPage(b *testing.B) {
	sim, query := benchSim(b, 100_000)
	req, _ := http.NewRequest(http.MethodGet, PathSearch+"?"+query, nil)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req.URL.RawQuery = query + "&page=" + strconv.Itoa(1+i%400)
		q, err := sim.parseSearch(req)
		if err != nil {
			b.Fatal(err)
		}
		sim.renderPage(&q)
	}
	b.ReportMetric(float64(b.N*250)/b.Elapsed().Seconds(), "orders/s")
}

func decodeTokensB(b *testing.B, resp *http.Response) string {
	b.Helper()
	defer resp.Body.Close()
	var tk struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tk); err != nil || tk.AccessToken == "" {
		b.Fatalf("login: %v", err)
	}
	return tk.AccessToken
}
