#!/usr/bin/env node
// Drives a broker with kafkajs 2.2.4: admin create, keyed produce with headers through every
// codec kafkajs has (gzip built in; snappy, lz4 from their codec packages; zstd through a small
// adapter over zstd-napi, since @kafkajs/zstd's native dependency no longer builds on Node 20),
// acks=all, read-back through a consumer group (kafkajs has no assign()), seek to an offset and
// to a timestamp, committed offsets, a check of the stored segments (tests/clients/segments.py),
// admin delete. Exits non-zero on any failure.
//
//   node kafkajs_driver.js --bootstrap HOST:PORT --topic-prefix P --log-dir DIR
//                          [--timeout S] [--small] [--codecs none,gzip,...]
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const { execFileSync } = require('child_process')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')
const zstd = require('zstd-napi')

const NAME = 'kafkajs'
const PARTITIONS = 3
const ALL_CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd']
const TYPES = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    return zstd.compress(encoder.buffer)
  },
  async decompress(buffer) {
    return zstd.decompress(buffer)
  },
})

class DriverError extends Error {}
const fail = (msg) => {
  throw new DriverError(msg)
}
const check = (cond, msg) => {
  if (!cond) fail(msg)
}

function parseArgs(argv) {
  const a = { timeout: 60, small: false, codecs: ALL_CODECS.slice() }
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`)
      return argv[++i]
    }
    if (k === '--bootstrap') a.bootstrap = v()
    else if (k === '--topic-prefix') a.prefix = v()
    else if (k === '--log-dir') a.logDir = v()
    else if (k === '--timeout') a.timeout = Number(v())
    else if (k === '--small') a.small = true
    else if (k === '--codecs') a.codecs = v().split(',').filter(Boolean)
    else usage(`unknown argument ${k}`)
  }
  if (!a.bootstrap || !a.prefix || !a.logDir) usage('--bootstrap, --topic-prefix, --log-dir are required')
  for (const c of a.codecs) if (!(c in TYPES)) usage(`unknown codec ${c}`)
  return a
}

function usage(msg) {
  console.error(`${NAME}: ${msg}\nusage: kafkajs_driver.js --bootstrap HOST:PORT --topic-prefix P ` +
    '--log-dir DIR [--timeout S] [--small] [--codecs c1,c2]')
  process.exit(2)
}

const t0 = Date.now()
const step = (msg) => console.log(`[${NAME} ${((Date.now() - t0) / 1000).toFixed(2).padStart(6)}s] ${msg}`)

// Same shapes as tests/clients/driverlib.py make_records: values start with "<codec>|" so the
// segment check can tell which producer wrote a batch; the filler makes compression pay off.
const FILLER = Buffer.from('samsa-kafka-compatible-log-broker;'.repeat(8))
function makeRecords(codec, prefix, count, tBase, start) {
  const out = []
  for (let i = 0; i < count; i++) {
    const g = start + i
    const filler = Buffer.concat([FILLER, FILLER.subarray(0, (i * 37) % FILLER.length)])
    const key = i === 1 ? null : Buffer.concat([Buffer.from(`key-${codec}-${i}`), Buffer.from([0, 255, i % 256])])
    const value = Buffer.concat([Buffer.from(`${codec}|${prefix}|${String(i).padStart(4, '0')}|`), filler,
      Buffer.from([0, 128 + (i % 128)])])
    // kafkajs carries headers as an object; a repeated key is an array value (kept adjacent).
    const headers = [
      [],
      [['h1', Buffer.from('v1')], ['bin', Buffer.from([0, 1, 254, 255])]],
      [['dup', Buffer.from('a')], ['dup', Buffer.from('b')], ['empty', Buffer.alloc(0)]],
      [['codec', Buffer.from(codec)]],
    ][i % 4]
    out.push({ partition: i % PARTITIONS, key, value, headers, timestamp: tBase + g * 10, codec })
  }
  return out
}

function headersToObject(list) {
  const o = {}
  for (const [k, v] of list) {
    if (k in o) o[k] = [].concat(o[k], [v])
    else o[k] = v
  }
  return o
}

function headersFromObject(o) {
  const out = []
  for (const [k, v] of Object.entries(o || {})) {
    for (const x of Array.isArray(v) ? v : [v]) out.push([k, x])
  }
  return out
}

const eqBuf = (a, b) => (a === null || b === null ? a === b : Buffer.compare(a, b) === 0)

function checkRecord(p, offset, want, got, what) {
  const where = `partition ${p} offset ${got.offset} (${what}, codec ${want.codec})`
  check(Number(got.offset) === offset, `${where}: expected offset ${offset}`)
  check(eqBuf(got.key, want.key), `${where}: key ${got.key} != produced ${want.key}`)
  check(eqBuf(got.value, want.value), `${where}: value differs from the produced one`)
  const gh = got.headers
  check(gh.length === want.headers.length && gh.every(([k, v], i) => k === want.headers[i][0] &&
    eqBuf(v, want.headers[i][1])), `${where}: headers ${JSON.stringify(gh)} != produced ` +
    JSON.stringify(want.headers))
  check(Number(got.timestamp) === want.timestamp,
    `${where}: timestamp ${got.timestamp} != produced ${want.timestamp}`)
}

function comparePartition(p, want, got, what) {
  check(got.length === want.length, `partition ${p}: ${what} ${got.length} records, produced ${want.length}`)
  want.forEach((w, i) => checkRecord(p, i, w, got[i], `${what} #${i}`))
}

const byPartition = (recs) => {
  const out = {}
  for (let p = 0; p < PARTITIONS; p++) out[p] = []
  for (const r of recs) out[r.partition].push(r)
  return out
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitFor(pred, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await pred()
    if (v) return v
    if (Date.now() > deadline) fail(`timed out after ${timeoutMs / 1000}s waiting for ${what}`)
    await sleep(100)
  }
}

// Runs a consumer of a fresh group until `done(got)` holds; returns what arrived per partition.
async function consumeWith(kafka, groupId, topic, fromBeginning, done, timeoutMs, afterRun) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000,
    maxWaitTimeInMs: 200 })
  const got = {}
  for (let p = 0; p < PARTITIONS; p++) got[p] = []
  let crashed = null
  // kafkajs restarts a consumer after a retriable error (e.g. the coordinator still loading
  // a fresh __consumer_offsets); only a crash it gives up on is a failure.
  consumer.on(consumer.events.CRASH, (e) => {
    if (!e.payload.restart) crashed = e.payload.error
  })
  try {
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        got[partition].push({ offset: message.offset, key: message.key, value: message.value,
          headers: headersFromObject(message.headers), timestamp: message.timestamp })
      },
    })
    if (afterRun) await afterRun(consumer)
    await waitFor(() => {
      if (crashed) fail(`consumer crashed: ${crashed.message || crashed}`)
      return done(got)
    }, timeoutMs, `records for group ${groupId} (have ${Object.values(got).map((v) => v.length)})`)
    return { got, consumer }
  } catch (e) {
    await consumer.disconnect().catch(() => {})
    throw e
  }
}

async function main(args) {
  const topic = `${args.prefix}-kafkajs`
  step(`kafkajs ${require('kafkajs/package.json').version}, node ${process.version}, broker ${args.bootstrap}`)
  const kafka = new Kafka({ clientId: 'samsa-kafkajs-driver', brokers: [args.bootstrap],
    logLevel: logLevel.ERROR, retry: { retries: 5, initialRetryTime: 100 }, requestTimeout: 20000 })
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ waitForLeaders: true,
    topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }] })
  check(created, `CreateTopics ${topic}: the topic already existed`)
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  check(md.topics[0].partitions.length === PARTITIONS,
    `${topic} has ${md.topics[0].partitions.length} partitions, created ${PARTITIONS}`)
  // kafkajs retries a whole send() when one partition of it fails, so a produce that races the
  // new partitions' leaders (NOT_LEADER_OR_FOLLOWER on one of them) duplicates the records of
  // the others. Wait until every partition's leader answers ListOffsets first.
  await waitFor(async () => {
    try {
      return (await admin.fetchTopicOffsets(topic)).length === PARTITIONS
    } catch (e) {
      return false
    }
  }, 15000, `leaders of ${topic} to answer ListOffsets`)
  step(`created ${topic} with ${PARTITIONS} partitions`)

  const tBase = Date.now() - 600000
  const count = args.small ? 3 : 30
  const produced = []
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  for (const codec of args.codecs) {
    const recs = makeRecords(codec, args.prefix, count, tBase, produced.length)
    const res = await producer.send({ topic, acks: -1, compression: TYPES[codec],
      messages: recs.map((r) => ({ key: r.key, value: r.value, partition: r.partition,
        headers: headersToObject(r.headers), timestamp: String(r.timestamp) })) })
    for (const r of res) check(r.errorCode === 0, `${codec}: produce error ${r.errorCode} on partition ${r.partition}`)
    produced.push(...recs)
    step(`produced ${recs.length} records with compression ${codec}, acks=all`)
  }
  await producer.disconnect()
  const perPart = byPartition(produced)

  const offsets = await admin.fetchTopicOffsets(topic)
  for (const o of offsets) {
    const want = perPart[o.partition].length
    check(Number(o.low) === 0 && Number(o.high) === want,
      `partition ${o.partition}: offsets (${o.low}, ${o.high}), expected (0, ${want})`)
  }
  step('ListOffsets earliest/latest match the produced counts')

  const group = `${args.prefix}-kafkajs-group`
  const full = (got) => Object.keys(perPart).every((p) => got[p].length >= perPart[p].length)
  const { got, consumer } = await consumeWith(kafka, group, topic, true, full, 40000)
  try {
    for (let p = 0; p < PARTITIONS; p++) comparePartition(p, perPart[p], got[p], 'group-consumed')
    step(`group ${group}: consumed all ${produced.length} records back byte-identical, in order per partition`)
    // Stay in the group past one heartbeat interval so the member heartbeats at least once.
    await sleep(1500)
    await consumer.commitOffsets(Object.keys(perPart).map((p) => ({ topic, partition: Number(p),
      offset: String(perPart[p].length) })))
  } finally {
    await consumer.disconnect()
  }
  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  for (const { partition, offset } of committed[0].partitions) {
    check(Number(offset) === perPart[partition].length,
      `group ${group}: committed ${offset} for partition ${partition}, expected ${perPart[partition].length}`)
  }
  step(`group ${group}: committed offsets read back`)

  const seekP = 2
  const seekOff = Math.floor(perPart[2].length / 3)
  const tsP = 1
  const tsIdx = Math.floor(perPart[tsP].length / 2)
  const ts = perPart[tsP][tsIdx].timestamp - 3
  const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, ts)
  const found = byTime.find((o) => o.partition === tsP)
  check(found && Number(found.offset) === tsIdx,
    `ListOffsets by timestamp ${ts} on partition ${tsP} gave ${found && found.offset}, expected ${tsIdx}`)
  const sgroup = `${args.prefix}-kafkajs-seek`
  const seeks = await consumeWith(kafka, sgroup, topic, false,
    (g) => g[seekP].length >= 1 && g[tsP].length >= 1, 30000, async (c) => {
      c.seek({ topic, partition: seekP, offset: String(seekOff) })
      c.seek({ topic, partition: tsP, offset: String(found.offset) })
    })
  try {
    checkRecord(seekP, seekOff, perPart[seekP][seekOff], seeks.got[seekP][0], 'after seek')
    step(`seek to partition ${seekP} offset ${seekOff}: first record is the right one`)
    checkRecord(tsP, tsIdx, perPart[tsP][tsIdx], seeks.got[tsP][0], `after seek to time ${ts}`)
    step(`fetchTopicOffsetsByTimestamp on partition ${tsP} -> offset ${tsIdx}, first record matches`)
  } finally {
    await seeks.consumer.disconnect()
  }

  const expect = { topic, partitions: PARTITIONS, expected: {} }
  for (const r of produced) expect.expected[r.codec] = (expect.expected[r.codec] || 0) + 1
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kafkajs-driver-'))
  const spec = path.join(tmp, 'expect.json')
  fs.writeFileSync(spec, JSON.stringify(expect))
  try {
    const out = execFileSync('/usr/bin/python3', [path.join(__dirname, '..', 'segments.py'), 'check',
      args.logDir, spec], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30000 })
    for (const line of out.trim().split('\n')) step(line)
  } catch (e) {
    fail(`stored segments: ${(e.stderr || e.message).trim()}`)
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }

  await admin.deleteTopics({ topics: [topic], timeout: 15000 })
  await waitFor(async () => !(await admin.listTopics()).includes(topic), 15000, `${topic} to disappear`)
  await admin.disconnect()
  step(`deleted ${topic}`)
}

const args = parseArgs(process.argv)
setTimeout(() => {
  console.error(`${NAME}: FAIL: hard timeout of ${args.timeout}s reached`)
  process.exit(3)
}, args.timeout * 1000)
main(args).then(() => {
  step('PASS')
  process.exit(0)
}, (e) => {
  if (e instanceof DriverError) console.error(`${NAME}: FAIL: ${e.message}`)
  else console.error(`${NAME}: FAIL: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
