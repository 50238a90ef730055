import type { IncomingMessage } from 'node:http'
import { isIP } from 'node:net'
import { ApiError } from './errors.js'

/** Host names every server accepts for itself: the loopback names. */
const LOOPBACK_NAMES: readonly string[] = ['localhost', '127.0.0.1', '::1']

/**
 * The names a request's `Host` may carry: the loopback names, the address the
 * connection arrived on (an IP literal), and the configured names. Anything
 * else is refused with 421 before any other work, so a page on another origin
 * that resolves its own name to this machine (DNS rebinding) reaches nothing.
 */
export function createHostCheck(allowedHosts: readonly string[]): (req: IncomingMessage) => void {
  const allowed = new Set([...LOOPBACK_NAMES, ...allowedHosts.map(normalizeName)])
  return (req) => {
    const raw = req.headers.host
    const localPort = req.socket.localPort
    const parsed = raw === undefined ? undefined : splitHost(raw)
    const local = req.socket.localAddress === undefined ? undefined : normalizeName(req.socket.localAddress)
    const portOk = parsed !== undefined && (parsed.port === undefined ? localPort === 80 : parsed.port === localPort)
    const nameOk = parsed !== undefined && (allowed.has(parsed.name) || (isIP(parsed.name) !== 0 && parsed.name === local))
    if (portOk && nameOk) return
    const shown = raw === undefined ? 'no Host header' : `Host "${raw.length > 64 ? `${raw.slice(0, 64)}…` : raw}"`
    throw new ApiError(
      'API_MISDIRECTED_REQUEST',
      `This host answers only requests addressed to itself (Host 127.0.0.1, localhost or [::1] with port ${localPort ?? '?'}, or a configured name); the request has ${shown}. Use the URL the server printed, or add the name to allowedHosts.`,
    )
  }
}

/** `name[:port]` or `[v6]:port`, lower-cased; `undefined` when it is not a host. */
function splitHost(value: string): { name: string; port?: number } | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:[\]/@]+))(?::([0-9]{1,5}))?$/.exec(value.trim())
  if (match === null) return undefined
  const name = normalizeName(match[1] ?? match[2] ?? '')
  if (match[3] === undefined) return { name }
  return { name, port: Number(match[3]) }
}

/** Lower-case, without brackets, and an IPv4-mapped IPv6 address as plain IPv4. */
function normalizeName(name: string): string {
  const bare = name.toLowerCase().replace(/^\[(.*)\]$/, '$1')
  return bare.startsWith('::ffff:') && isIP(bare.slice(7)) === 4 ? bare.slice(7) : bare
}
