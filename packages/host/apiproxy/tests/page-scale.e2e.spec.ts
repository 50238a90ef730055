import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseSessionHeader, SESSION_HEADER_VERSION, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { launchChromium, screenshot } from '@dsh/test-kit/browser'
import type { BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type Stack, startStack } from './support/stack.js'

// The sessions list over a corpus of 10,000 sessions: the first rows show
// after one cursor page, never the whole corpus. Requests and bytes are
// counted in the browser; static assets and the event stream are not API reads.

const SESSIONS = 10_000
const CREATED_AT = 1_700_000_000_000
const outputDir = fileURLToPath(new URL('../test-output/', import.meta.url))
let stack: Stack
let userDataDir: string
let browser: BrowserContext
let page: Page

function eventsOf(i: number): StoredSessionEvent[] {
  const time = CREATED_AT + i * 1000
  return [
    { type: 'turn/start', seq: SessionSeq(0), time, data: { turn: 1 } },
    { type: 'user/message', seq: SessionSeq(1), time: time + 1, data: { text: `question number ${i}` } },
  ] as StoredSessionEvent[]
}

beforeAll(async () => {
  stack = await startStack()
  for (let i = 0; i < SESSIONS; i++) {
    const id = `s-${String(i).padStart(5, '0')}`
    const header = parseSessionHeader({
      version: SESSION_HEADER_VERSION,
      id,
      createdAt: CREATED_AT + i * 1000,
      isSeeded: false,
      delegationDepth: 0,
    })
    await stack.persistence.append({ header, inheritedEventCount: SessionLogOffset(0) }, eventsOf(i))
  }
  userDataDir = mkdtempSync(join(tmpdir(), 'dsh-chromium-'))
  browser = await launchChromium(userDataDir)
  page = browser.pages()[0] ?? (await browser.newPage())
})

afterAll(async () => {
  await browser?.close()
  await stack?.close()
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true })
})

const isApiRead = (url: string) => {
  const path = new URL(url).pathname
  return path.startsWith('/api/') && !path.endsWith('/stream')
}

it('shows the first rows of 10,000 sessions after at most 2 API requests and 200 KiB, and pages on with the cursor', async () => {
  const responses: Array<{ url: string; bytes: Promise<number> }> = []
  page.on('response', (response) => {
    if (isApiRead(response.url()))
      responses.push({
        url: response.url(),
        bytes: response.body().then(
          (body) => body.length,
          () => 0,
        ),
      })
  })
  // Counts the page's API fetches at the moment the first row enters the table (test instrumentation, injected before the page's scripts).
  await page.addInitScript({
    content: `
      globalThis.dshApiFetches = 0
      const fetchOriginal = globalThis.fetch.bind(globalThis)
      globalThis.fetch = (input, init) => {
        if (String(input).startsWith('/api/')) globalThis.dshApiFetches++
        return fetchOriginal(input, init)
      }
      new MutationObserver((records, observer) => {
        if (document.querySelector('#sessions tbody tr') === null) return
        globalThis.dshAtFirstRow = globalThis.dshApiFetches
        observer.disconnect()
      }).observe(document, { childList: true, subtree: true })
    `,
  })
  await page.goto(stack.server.pageUrl)
  await page.locator('#sessions tbody tr').first().waitFor()
  const atFirstRow = await page.evaluate(() => (globalThis as unknown as { dshAtFirstRow?: number }).dshAtFirstRow)
  expect(atFirstRow).toBeGreaterThanOrEqual(1)
  expect(atFirstRow).toBeLessThanOrEqual(2)
  const first = responses.slice(0, atFirstRow)
  const firstBytes = (await Promise.all(first.map((r) => r.bytes))).reduce((a, b) => a + b, 0)
  expect(firstBytes).toBeLessThanOrEqual(200 * 1024)
  expect(await page.locator('#sessions tbody tr').count()).toBe(50)
  expect(await page.locator('#sessions tbody tr').first().getAttribute('data-session-id')).toBe('s-00000')

  // Each row's subagent count is one small header-only listing of its children.
  await expect.poll(() => page.locator('#sessions td.children[data-children="pending"]').count(), { timeout: 120_000 }).toBe(0)
  const afterCounts = responses.length
  const countBytes = (await Promise.all(responses.map((r) => r.bytes))).reduce((a, b) => a + b, 0)

  // The next page continues from the cursor: 100 rows, one more listing read.
  await page.click('#more-sessions')
  await page.locator('#sessions tbody tr[data-session-id="s-00099"]').waitFor()
  expect(await page.locator('#sessions tbody tr').count()).toBe(100)
  const paged = responses.slice(afterCounts).map((r) => new URL(r.url))
  expect(paged[0]?.searchParams.get('cursor')).toBeTruthy()
  await screenshot(page, outputDir, 'list-10k')
  console.log(
    `10k list: first rows after ${atFirstRow} API request(s), ${firstBytes} bytes; with the page's subagent counts ${afterCounts} requests, ${countBytes} bytes`,
  )
})
