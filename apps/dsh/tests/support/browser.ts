import { mkdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { type BrowserContext, chromium, type Page } from 'playwright-core'
import { expect } from 'vitest'

// Debian's headless Chromium through playwright-core (never a downloaded
// browser) and axe-core from the installed package.

/**
 * Every wait and action of the context allows 120 s (playwright's own default
 * is 30 s): a timeout only guards a hang, and a busy machine can take long to
 * render a page.
 */
export async function launchChromium(userDataDir: string): Promise<BrowserContext> {
  const context = await chromium.launchPersistentContext(userDataDir, {
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
  context.setDefaultTimeout(120_000)
  return context
}

const axeSource = readFileSync(join(createRequire(import.meta.url).resolve('axe-core'), '..', 'axe.min.js'), 'utf8')

/** axe-core's serious and critical violations on the page as it is (evaluated over the DevTools protocol: the page's CSP refuses inline scripts). */
export async function seriousViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(axeSource)
  const violations = (await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: unknown[] }> } }).axe
    return (await axe.run()).violations
  })) as { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[]
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`)
}

/** A full-page screenshot at `<dir>/<name>.png`. */
export async function screenshot(page: Page, dir: string, name: string): Promise<string> {
  mkdirSync(dir, { recursive: true })
  const path = join(dir, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  expect(statSync(path).size).toBeGreaterThan(1000)
  return path
}
