package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// slogCalls are the methods and functions of log/slog that take key-value
// pairs after their message (or, for With, from the first argument).
var slogCalls = map[string]int{ // name -> index of the first key
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// TestLogErrorKey keeps one key for errors in every log line of the module:
// "err". It reads the source (a vet-like check, no types): a key-value pair
// or slog attribute whose value looks like an error (err, fooErr, x.Err(),
// err.Error()) must use the key "err", and no pair may use the key "error".
func TestLogErrorKey(t *testing.T) {
	fset := token.NewFileSet()
	var problems []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "vendor" || (strings.HasPrefix(name, ".") && path != "../..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		problems = append(problems, logKeyProblems(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// logKeyProblems lists the log calls of f that give an error another key.
func logKeyProblems(fset *token.FileSet, f *ast.File) []string {
	var out []string
	check := func(call ast.Node, key ast.Expr, value ast.Expr) {
		lit, ok := key.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		k, err := strconv.Unquote(lit.Value)
		if err != nil || k == "err" {
			return
		}
		if k == "error" || (value != nil && looksLikeError(value)) {
			out = append(out, fset.Position(call.Pos()).String()+": log key "+strconv.Quote(k)+" for an error; use \"err\"")
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		// slog.Any("error", err), slog.String("error", err.Error()), ...
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "slog" && len(call.Args) == 2 {
			switch sel.Sel.Name {
			case "Any", "String":
				check(call, call.Args[0], call.Args[1])
			}
			return true
		}
		first, ok := slogCalls[sel.Sel.Name]
		if !ok || len(call.Args) <= first {
			return true
		}
		if first > 0 && !isStringish(call.Args[first-1]) && sel.Sel.Name != "Log" {
			return true // not a message argument: not a slog call (t.Error(err), ...)
		}
		for i := first; i < len(call.Args); i++ {
			if _, ok := call.Args[i].(*ast.BasicLit); !ok {
				continue // an attribute, checked above, or a variadic slice
			}
			var value ast.Expr
			if i+1 < len(call.Args) {
				value = call.Args[i+1]
			}
			check(call, call.Args[i], value)
			i++
		}
		return true
	})
	return out
}

// isStringish: a message argument (a literal or a string expression that is
// not obviously an error).
func isStringish(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.BinaryExpr:
		return isStringish(e.X) || isStringish(e.Y)
	}
	return false
}

// looksLikeError: err, fooErr, e.err, x.Err(), err.Error(), errors.New(...), fmt.Errorf(...).
func looksLikeError(e ast.Expr) bool {
	name := func(s string) bool {
		return s == "err" || s == "e" || strings.HasSuffix(s, "Err") || strings.HasSuffix(s, "err")
	}
	switch e := e.(type) {
	case *ast.Ident:
		return name(e.Name)
	case *ast.SelectorExpr:
		return name(e.Sel.Name)
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			switch sel.Sel.Name {
			case "Error", "Err", "Errorf", "New", "WriteErr", "LastError":
				return sel.Sel.Name != "New" || isPkg(sel.X, "errors")
			}
		}
	}
	return false
}

func isPkg(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestLogKeyProblems: what the source check flags and what it leaves alone.
func TestLogKeyProblems(t *testing.T) {
	for src, want := range map[string]int{
		`log.Error("x", "err", err)`:                            0,
		`log.Warn("x", "error", err.Error())`:                   1,
		`log.Warn("x", "reason", err)`:                          1,
		`log.Info("x", "cause", d.store.WriteErr())`:            1,
		`log.ErrorContext(ctx, "x", "e", fmt.Errorf("y"))`:      1,
		`log.With("component", "nats", "lastErr", lastErr)`:     1,
		`log.Error("x", slog.Any("error", err))`:                1,
		`log.Info("x", "errors", n)`:                            0,
		`log.Info("x", "bad_entries", st.BadEntries)`:           0,
		`t.Error("unexpected", err)`:                            0,
		`log.Log(ctx, slog.LevelWarn, "x", "failure", connErr)`: 1,
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", "package p\nfunc f() {\n"+src+"\n}\n", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := logKeyProblems(fset, f); len(got) != want {
			t.Errorf("%s: %d problems %v, want %d", src, len(got), got, want)
		}
	}
}
