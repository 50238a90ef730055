import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type ApiServer, createHost, type Host } from '@dsh/host'
import { SessionId } from '@dsh/session'
import { createScriptedDriver } from '@dsh/subagent'
import { type BrowserContext, chromium } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'

// The web catalog page over a root built by the real `dsh demo` (built CLI),
// served the way `dsh serve` serves it (createHost's http plugin), in Debian's headless Chromium.

const bin = join(import.meta.dirname, '..', 'dist', 'bin.js')
const outputDir = join(import.meta.dirname, '..', 'test-output')
let dir: string
let host: Host
let server: ApiServer
let browser: BrowserContext
let release!: () => void
const hold = new Promise<void>((resolve) => (release = resolve))

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-page-'))
  const root = join(dir, 'demo')
  await promisify(execFile)(process.execPath, [bin, 'demo', '--json', '--root', root])
  host = await createHost({
    root,
    driver: createScriptedDriver([
      { kind: 'message', text: 'on it' },
      { kind: 'until', promise: hold },
    ]),
    http: { token: 'page-test-token-0123456789' },
  })
  server = host.http!
  browser = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
    viewport: { width: 1280, height: 800 },
  })
}, 120_000)

afterAll(async () => {
  release()
  await browser?.close()
  await host?.dispose()
  rmSync(dir, { recursive: true, force: true })
})

it("shows the demo parent's tree and a row's activity changes without reload when a child finishes", async () => {
  const page = browser.pages()[0] ?? (await browser.newPage())
  const row = (id: string) => page.locator(`li[data-row-id="${id}"]`)
  await page.goto(`${server.pageUrl}#session=release-1.4`)
  await row('release-1.4.planner.fact-checker').waitFor()
  expect(await row('release-1.4.researcher').getAttribute('data-mode')).toBe('continuable')
  expect(await row('release-1.4.planner').locator('li[data-row-id="release-1.4.planner.fact-checker"]').count()).toBe(1)
  expect(await row('release-1.4.log-summarizer').getAttribute('data-reason')).toBe('unavailable')

  // Resume the parent and spawn a child that holds its turn open.
  const parent = host.sessions.restore(await host.persistence.load(SessionId('release-1.4')))
  const child = host.subagents.spawn(parent, {
    id: 'release-1.4.hotfix',
    mode: 'one-shot',
    label: 'hotfix',
    context: 'fresh',
    prompt: 'patch it',
  })
  await row('release-1.4.hotfix').and(page.locator('[data-activity="running"]')).waitFor({ timeout: 15_000 })
  await page.evaluate(() => ((globalThis as unknown as { dshMarker: number }).dshMarker = 7))

  release()
  await child.done
  await row('release-1.4.hotfix').and(page.locator('[data-activity="inactive"]')).waitFor({ timeout: 15_000 })
  // Same document: a reload would have wiped the marker.
  expect(await page.evaluate(() => (globalThis as unknown as { dshMarker?: number }).dshMarker)).toBe(7)

  mkdirSync(outputDir, { recursive: true })
  const screenshot = join(outputDir, 'demo-catalog.png')
  await page.screenshot({ path: screenshot, fullPage: true })
  expect(statSync(screenshot).size).toBeGreaterThan(1000)
}, 60_000)
