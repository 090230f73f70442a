/*
 * demangle.cpp — kernel names through the C++ ABI's demangler (demangle.h).
 * The one C++ file of gpu/ (besides the kernels): abi::__cxa_demangle has no
 * C interface. No exception leaves it: on any failure the raw name is kept.
 */
#include "gpu/demangle.h"

#include <cxxabi.h>
#include <cstdio>
#include <cstdlib>
#include <string>

static std::string readable(const std::string &mangled)
{
    int status = 0;
    char *d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    if (status != 0 || !d) {
        std::free(d);
        return mangled;
    }
    std::string s = d;
    std::free(d);
    const std::string anon = "(anonymous namespace)::";
    for (size_t p; (p = s.find(anon)) != std::string::npos;) s.erase(p, anon.size());
    /* The parameter list: the parenthesised tail, matched from the end. */
    if (!s.empty() && s.back() == ')') {
        int depth = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == ')') depth++;
            else if (s[i] == '(' && --depth == 0) {
                s.erase(i);
                break;
            }
        }
    }
    if (s.compare(0, 5, "void ") == 0) s.erase(0, 5);
    return s;
}

extern "C" void loom_demangle(const char *name, char *out, size_t n)
{
    if (n == 0) return;
    const char *raw = name ? name : "?";
    try {
        std::string s = raw;
        if (s.size() > 2 && s[0] == '_' && s[1] == 'Z') s = readable(s);
        std::snprintf(out, n, "%s", s.c_str());
    } catch (...) {
        std::snprintf(out, n, "%s", raw);
    }
}
