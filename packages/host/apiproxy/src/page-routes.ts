import { readFileSync } from 'node:fs'
import type { AuthMode } from './auth.js'
import { BASE_HEADERS } from './http.js'
import { unknownQueryParameter } from './request.js'
import type { Route } from './route.js'

// The page is plain files in `src/web/` (no build step), loaded on first use.
// Resolved through the package root so the same path works from `src/` and `dist/`.
const webDir = new URL('../src/web/', import.meta.url)
const cache = new Map<string, Buffer>()

function asset(name: string): Buffer {
  const cached = cache.get(name)
  if (cached) return cached
  const body = readFileSync(new URL(name, webDir))
  cache.set(name, body)
  return body
}

/** Same-origin only; no inline code, no external resources, no framing. */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

function staticRoute(path: string, file: string, contentType: string, auth: AuthMode): Route {
  return {
    path,
    auth,
    async serve({ res }, _captures, query) {
      const unknown = Object.keys(query)[0]
      if (unknown !== undefined)
        throw auth === 'public' ? unknownQueryParameter(unknown, `/${file}`, 'public') : unknownQueryParameter(unknown, 'this page')
      const body = asset(file)
      res.writeHead(200, {
        ...BASE_HEADERS,
        'Content-Type': contentType,
        'Content-Length': String(body.length),
        'Content-Security-Policy': CONTENT_SECURITY_POLICY,
      })
      res.end(body)
    },
  }
}

/** The page's ES modules (`app.js` imports the others by relative path). */
export const PAGE_SCRIPTS: readonly string[] = Object.freeze([
  'app.js',
  'api.js',
  'dom.js',
  'list.js',
  'live.js',
  'session.js',
  'transcript.js',
  'trace.js',
])

/**
 * `GET /?token=…` serves the catalog page; the token guards the page like the
 * API. Its scripts and stylesheet hold no data and are public.
 */
export const pageRoutes: readonly Route[] = [
  staticRoute('/', 'index.html', 'text/html; charset=utf-8', 'header-or-query'),
  ...PAGE_SCRIPTS.map((file) => staticRoute(`/${file}`, file, 'text/javascript; charset=utf-8', 'public')),
  staticRoute('/app.css', 'app.css', 'text/css; charset=utf-8', 'public'),
]
