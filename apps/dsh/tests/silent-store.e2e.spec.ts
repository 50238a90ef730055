import { execFile } from 'node:child_process'
import { createServer, type Server, type Socket } from 'node:net'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

// A "server" that accepts TCP connections and never answers (a black-holed
// address, a hung proxy): every command that opens the store must fail typed
// once its connect bound is over, instead of hanging. The bound comes from the
// URL's connect_timeout, as libpq reads it; no verdict here depends on speed.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
let server: Server
const sockets = new Set<Socket>()
let url: string

beforeAll(async () => {
  server = createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  url = `postgres://dsh:secret-password@127.0.0.1:${port}/dsh?connect_timeout=2`
})

afterAll(async () => {
  for (const socket of sockets) socket.destroy()
  await new Promise((resolve) => server.close(resolve))
})

function dsh(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [bin, ...args],
      { env: { ...process.env, DSH_STORE: '', DSH_DATABASE_URL: '' }, timeout: 120_000 },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : Number((error as { code?: number }).code ?? 1), stdout, stderr }),
    ),
  )
}

describe('a store that accepts connections and never answers', () => {
  it.each([
    ['sessions', ['sessions', '--json', '--store']],
    ['migrate', ['migrate', '--json', '--store']],
    ['verify', ['verify', '--json', '--store']],
  ])('dsh %s fails with POSTGRES_PERSISTENCE_UNAVAILABLE naming the server, never the password', async (_name, args) => {
    const result = await dsh([...args, url])
    expect(result.code, result.stderr).toBe(1)
    const { error } = JSON.parse(result.stdout) as { error: { code: string; message: string } }
    expect(error.code).toBe('POSTGRES_PERSISTENCE_UNAVAILABLE')
    expect(error.message).toContain(`${new URL(url).host}/dsh: Connection terminated due to connection timeout`)
    expect(result.stdout + result.stderr).not.toContain('secret-password')
  })
})
