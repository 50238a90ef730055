import { appendUserMessage } from '@dsh/session-persistence'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pngBytes } from './support/png.js'
import { type Stack, startStack, TOKEN } from './support/stack.js'

// The attachment routes over the real disk stack: bytes as stored, a content
// type proven by the bytes, never a document the browser would run.

let stack: Stack
const refs: Record<string, string> = {}
const png = pngBytes(4, 4, [0, 128, 0])
const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>')

beforeAll(async () => {
  stack = await startStack({ backend: 'disk' })
  const parent = stack.sessions.create({ id: 'parent' })
  const event = await appendUserMessage(stack.persistence, parent, 'files', [
    { bytes: png, mediaType: 'image/png', name: 'green.png' },
    { bytes: svg, mediaType: 'image/svg+xml', name: 'x.svg' },
  ])
  const blocks = event.data.blocks as readonly { attachment?: { digest: string; name?: string } }[]
  for (const block of blocks) if (block.attachment) refs[block.attachment.name ?? ''] = block.attachment.digest
  stack.gates.hold('child')
  const child = stack.subagents.spawn(parent, { mode: 'one-shot', label: 'c', context: 'fresh', prompt: 'p', id: 'child' })
  await appendUserMessage(stack.persistence, child.session, 'pic', [{ bytes: png, mediaType: 'image/png' }])
})

afterAll(async () => {
  stack?.gates.release('child')
  await stack?.close()
})

const get = (path: string, token: string | null = TOKEN) =>
  fetch(`${stack.server.url}${path}`, { headers: token === null ? {} : { Authorization: `Bearer ${token}` } })

describe('attachment routes', () => {
  it('answers a PNG inline with its bytes, nosniff and a sandboxing CSP; the token may ride in the query', async () => {
    const response = await get(`/api/sessions/parent/attachments/${refs['green.png']}`, null).catch(() => undefined)
    expect(response?.status).toBe(401)
    const viaQuery = await get(`/api/sessions/parent/attachments/${refs['green.png']}?token=${TOKEN}`, null)
    expect(viaQuery.status).toBe(200)
    expect(viaQuery.headers.get('content-type')).toBe('image/png')
    expect(viaQuery.headers.get('x-content-type-options')).toBe('nosniff')
    expect(viaQuery.headers.get('content-disposition')).toMatch(/^inline; filename="[0-9a-f]{16}"$/)
    expect(viaQuery.headers.get('content-security-policy')).toBe("default-src 'none'; sandbox")
    expect(Buffer.from(await viaQuery.arrayBuffer()).equals(png)).toBe(true)
  })

  it('answers anything it cannot prove a raster image (an SVG claiming image/svg+xml) as an octet-stream download', async () => {
    const response = await get(`/api/sessions/parent/attachments/${refs['x.svg']}`)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/octet-stream')
    expect(response.headers.get('content-disposition')).toMatch(/^attachment; /)
    expect(Buffer.from(await response.arrayBuffer()).equals(svg)).toBe(true)
  })

  it("serves a subagent's attachment only through its parent's catalog", async () => {
    const digest = refs['green.png']
    const direct = await get(`/api/sessions/child/attachments/${digest}`)
    expect(direct.status).toBe(403)
    expect(((await direct.json()) as { code: string }).code).toBe('API_FORBIDDEN')
    const through = await get(`/api/sessions/parent/subagents/child/attachments/${digest}`)
    expect(through.status).toBe(200)
    expect(through.headers.get('content-type')).toBe('image/png')
    const stranger = await get(`/api/sessions/other/subagents/child/attachments/${digest}`)
    expect(stranger.status).toBe(404)
  })

  it('refuses a malformed digest, an unknown one and unknown query parameters with typed errors', async () => {
    const bad = await get('/api/sessions/parent/attachments/not-a-digest')
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { code: string }).code).toBe('API_BAD_REQUEST')
    const missing = await get(`/api/sessions/parent/attachments/${'0'.repeat(64)}`)
    expect(missing.status).toBe(404)
    expect(((await missing.json()) as { code: string }).code).toBe('API_NOT_FOUND')
    const extra = await get(`/api/sessions/parent/attachments/${refs['green.png']}?download=1`)
    expect(extra.status).toBe(400)
  })
})
