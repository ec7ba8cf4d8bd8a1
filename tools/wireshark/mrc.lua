-- mrc.lua: Wireshark dissector for vcluster's MRC (Multipath Reliable
-- Connection) RDMA transport over RoCEv2 (UDP port 4791).
--
-- MRC packets start with the InfiniBand BTH and use opcodes 0xC6..0xDE
-- (the IBA manufacturer-specific range), which Wireshark's InfiniBand
-- dissector shows as "Unknown OpCode". This plugin takes UDP port 4791,
-- decodes MRC opcodes itself (every BTH field and every MRC extension
-- header: METH, TSETH, RETH, ImmDt, AETH, SETH, CC_STATE, NETH, PETH,
-- ERTH/EETH, and the ICRC) and hands every other opcode (RoCEv2's own IB
-- opcodes) back to the InfiniBand dissector, so RoCE decodes as before.
--
-- The byte layouts are those of mrc/wire.go (go doc ./mrc). Packets cut
-- short, by a capture snaplen or by a switch that trimmed them, decode as
-- far as their bytes go and say where they end; nothing is reported as
-- malformed. Install and use: tools/wireshark/README.md.

local mrc = Proto("mrc", "Multipath Reliable Connection (MRC)")

local UDP_PORT = 4791

-- Opcodes (mrc/wire.go Op*).
local OP_WRITE_FIRST, OP_WRITE_MIDDLE, OP_WRITE_LAST = 0xC6, 0xC7, 0xC8
local OP_WRITE_LAST_IMM, OP_WRITE_ONLY, OP_WRITE_ONLY_IMM = 0xC9, 0xCA, 0xCB
local OP_ACK, OP_ENDPOINT_REQ, OP_ENDPOINT_RESP = 0xD1, 0xD8, 0xD9
local OP_SACK, OP_NACK, OP_PROBE = 0xDC, 0xDD, 0xDE
local OP_FIRST, OP_LAST = 0xC6, 0xDE -- the range this plugin claims

local opcodes = {
	[OP_WRITE_FIRST] = "WRITE_FIRST",
	[OP_WRITE_MIDDLE] = "WRITE_MIDDLE",
	[OP_WRITE_LAST] = "WRITE_LAST",
	[OP_WRITE_LAST_IMM] = "WRITE_LAST_WITH_IMMEDIATE",
	[OP_WRITE_ONLY] = "WRITE_ONLY",
	[OP_WRITE_ONLY_IMM] = "WRITE_ONLY_WITH_IMMEDIATE",
	[OP_ACK] = "TRANSPORT_ACK",
	[OP_ENDPOINT_REQ] = "ENDPOINT_REQUEST",
	[OP_ENDPOINT_RESP] = "ENDPOINT_RESPONSE",
	[OP_SACK] = "SACK",
	[OP_NACK] = "NACK",
	[OP_PROBE] = "PROBE",
}

local nack_codes = {
	[0x01] = "TRIMMED",
	[0x02] = "TRIMMED_LASTHOP",
	[0x06] = "NO_BITMAP",
	[0x07] = "NO_PKT_BUFFER",
	[0x0A] = "NO_RESOURCE",
	[0x0B] = "PSN_OOR_WINDOW",
	[0x19] = "UNEXP_EVENT",
}

local path_feedback = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP", [3] = "reserved" }

local syndromes = {
	[0x1F] = "ACK (credits invalid)",
	[0x62] = "NAK remote access error",
	[0x63] = "NAK remote operational error",
}

local endpoint_ops = { [1] = "PORT_STATUS_UPDATE", [2] = "EV_PROBE" }

local tseth_res = { [0] = "128 ns units", [1] = "1 us units" }

-- Header lengths (mrc/wire.go *Len).
local BTH_LEN, METH_LEN, TSETH_LEN, RETH_LEN, IMM_LEN = 12, 4, 4, 16, 4
local AETH_LEN, SETH_LEN, CCSTATE_LEN, NETH_LEN, PETH_LEN = 4, 28, 8, 12, 8
local ERTH_LEN, ICRC_LEN = 12, 4

-- DSCPs of trimmed packets (fabric.DSCPTrimmed, DSCPTrimmedLastHop): a
-- trimmed packet keeps only its first bytes and has no ICRC.
local DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP = 40, 42

-- F holds the fields by key; fields in declaration order (so Wireshark
-- lists them in a stable order).
local F, fields = {}, {}
local function field(key, f)
	F[key] = f
	fields[#fields + 1] = f
end

-- BTH
field("bth", ProtoField.none("mrc.bth", "Base Transport Header"))
field("opcode", ProtoField.uint8("mrc.bth.opcode", "Opcode", base.HEX, opcodes))
field("se", ProtoField.bool("mrc.bth.se", "Solicited Event", 8, nil, 0x80))
field("migreq", ProtoField.bool("mrc.bth.m", "MigReq", 8, nil, 0x40))
field("padcnt", ProtoField.uint8("mrc.bth.padcnt", "Pad Count", base.DEC, nil, 0x30))
field("tver", ProtoField.uint8("mrc.bth.tver", "Header Version", base.DEC, nil, 0x0F))
field("pkey", ProtoField.uint16("mrc.bth.p_key", "Partition Key", base.HEX))
field("bth_res4", ProtoField.uint8("mrc.bth.reserved", "Reserved (byte 4)", base.HEX))
field("destqp", ProtoField.uint24("mrc.bth.destqp", "Destination QP", base.HEX))
field("ackreq", ProtoField.bool("mrc.bth.ackreq", "Acknowledge Request", 8, nil, 0x80))
field("rtx", ProtoField.bool("mrc.bth.rtx", "Retransmission (rtx)", 8, nil, 0x40))
field("ts", ProtoField.bool("mrc.bth.ts", "TSETH follows (TS)", 8, nil, 0x20))
field("bth_res8", ProtoField.uint8("mrc.bth.reserved5", "Reserved (5 bits)", base.HEX, nil, 0x1F))
field("psn", ProtoField.uint24("mrc.bth.psn", "Packet Sequence Number", base.DEC))

-- METH, TSETH, RETH, ImmDt
field("meth", ProtoField.none("mrc.meth", "Message Extension Header (METH)"))
field("rqmsn", ProtoField.uint16("mrc.meth.rqmsn", "RQ Message Sequence Number", base.DEC))
field("msn", ProtoField.uint16("mrc.meth.msn", "Message Sequence Number", base.DEC))
field("tseth", ProtoField.none("mrc.tseth", "Timestamp Extension Header (TSETH)"))
field("tseth_ts", ProtoField.uint16("mrc.tseth.ts", "Timestamp", base.DEC))
field("tseth_coarse", ProtoField.uint16("mrc.tseth.coarse", "Resolution", base.DEC, tseth_res, 0x8000))
field("tseth_res", ProtoField.uint16("mrc.tseth.reserved", "Reserved", base.HEX, nil, 0x7FFF))
field("reth", ProtoField.none("mrc.reth", "RDMA Extended Transport Header (RETH)"))
field("va", ProtoField.uint64("mrc.reth.va", "Virtual Address", base.HEX))
field("rkey", ProtoField.uint32("mrc.reth.r_key", "Remote Key", base.HEX))
field("dmalen", ProtoField.uint32("mrc.reth.dmalen", "DMA Length (whole message)", base.DEC))
field("imm", ProtoField.uint32("mrc.immdt", "Immediate Data", base.HEX))
field("payload", ProtoField.bytes("mrc.payload", "Payload"))
field("payload_len", ProtoField.uint32("mrc.payload.len", "Payload Length (on the wire)", base.DEC))
field("icrc", ProtoField.uint32("mrc.icrc", "Invariant CRC (placeholder, not computed)", base.HEX))

-- AETH
field("aeth", ProtoField.none("mrc.aeth", "ACK Extended Transport Header (AETH)"))
field("syndrome", ProtoField.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX, syndromes))
field("aeth_msn", ProtoField.uint24("mrc.aeth.msn", "Message Sequence Number", base.DEC))

-- SETH, CC_STATE
field("seth", ProtoField.none("mrc.seth", "SACK Extension Header (SETH)"))
field("seth_m", ProtoField.uint8("mrc.seth.m", "Path Feedback (M)", base.DEC, path_feedback, 0xC0))
field("seth_p", ProtoField.bool("mrc.seth.p", "Probe Response (P)", 8, nil, 0x20))
field("seth_r", ProtoField.bool("mrc.seth.r", "Trigger Was Retransmitted (R)", 8, nil, 0x10))
field("seth_res0", ProtoField.uint8("mrc.seth.reserved0", "Reserved (4 bits)", base.HEX, nil, 0x0F))
field("seth_res1", ProtoField.uint8("mrc.seth.reserved1", "Reserved (byte 1)", base.HEX))
field("ack_offset", ProtoField.int16("mrc.seth.ack_offset", "ACK Offset (trigger PSN - cack_psn)", base.DEC))
field("seth_ev", ProtoField.uint32("mrc.seth.ev", "Reflected EV", base.HEX))
field("seth_res8", ProtoField.uint8("mrc.seth.reserved8", "Reserved (byte 8)", base.HEX))
field("cack", ProtoField.uint24("mrc.seth.cack_psn", "Cumulative ACK PSN", base.DEC))
field("mpr", ProtoField.uint8("mrc.seth.mpr", "MPR (x128 PSNs)", base.DEC))
field("seth_res13", ProtoField.uint8("mrc.seth.reserved13", "Reserved (byte 13)", base.HEX))
field("sack_offset", ProtoField.uint16("mrc.seth.sack_offset", "SACK Offset", base.DEC))
field("bitmap", ProtoField.uint64("mrc.seth.bitmap", "SACK Bitmap", base.HEX))
field("seth_res24", ProtoField.uint32("mrc.seth.reserved24", "Reserved (bytes 24..27)", base.HEX))
field("cc", ProtoField.none("mrc.ccstate", "Congestion State (CC_STATE)"))
field("cc_ts", ProtoField.uint16("mrc.ccstate.ts_echo", "Timestamp Echo", base.DEC))
field("cc_restore", ProtoField.bool("mrc.ccstate.restore_cwnd", "Restore cwnd", 16, nil, 0x8000))
field("cc_ooo", ProtoField.uint16("mrc.ccstate.ooo_count", "Out-of-order Count", base.DEC, nil, 0x7FFF))
field("cc_res", ProtoField.uint8("mrc.ccstate.reserved", "Reserved (1 bit)", base.HEX, nil, 0x80))
field("cc_pen", ProtoField.uint8("mrc.ccstate.rcv_cwnd_pen", "Receiver cwnd Penalty", base.DEC, nil, 0x7F))
field("cc_bytes", ProtoField.uint24("mrc.ccstate.rcvd_bytes", "Received Bytes (256 B units)", base.DEC))

-- NETH
field("neth", ProtoField.none("mrc.neth", "NACK Extension Header (NETH)"))
field("code", ProtoField.uint8("mrc.neth.code", "Reason", base.HEX, nack_codes))
field("neth_r", ProtoField.bool("mrc.neth.r", "NACKed Packet Was Retransmitted (R)", 8, nil, 0x80))
field("neth_res1", ProtoField.uint8("mrc.neth.reserved1", "Reserved (7 bits)", base.HEX, nil, 0x7F))
field("neth_ts", ProtoField.uint16("mrc.neth.ts_echo", "Timestamp Echo", base.DEC))
field("neth_ev", ProtoField.uint32("mrc.neth.ev", "Reflected EV", base.HEX))
field("neth_res8", ProtoField.uint8("mrc.neth.reserved8", "Reserved (byte 8)", base.HEX))
field("neth_psn", ProtoField.uint24("mrc.neth.psn", "NACK PSN", base.DEC))

-- PETH
field("peth", ProtoField.none("mrc.peth", "Probe Extension Header (PETH)"))
field("peth_ev", ProtoField.uint32("mrc.peth.ev", "EV", base.HEX))
field("peth_seq", ProtoField.uint16("mrc.peth.seq", "Probe Sequence", base.DEC))
field("peth_ts", ProtoField.uint16("mrc.peth.ts", "Timestamp", base.DEC))

-- ERTH (requests) and EETH (responses): the same layout.
for _, h in ipairs({ { "erth", "Endpoint Request Header (ERTH)" }, { "eeth", "Endpoint Response Header (EETH)" } }) do
	local k, p = h[1], "mrc." .. h[1]
	field(k, ProtoField.none(p, h[2]))
	field(k .. "_op", ProtoField.uint16(p .. ".op", "Operation", base.DEC, endpoint_ops))
	field(k .. "_req", ProtoField.uint16(p .. ".req_id", "Request ID", base.DEC))
	field(k .. "_mask", ProtoField.uint32(p .. ".port_status_mask", "Port Status Mask (bit p: plane p up)", base.HEX))
	field(k .. "_status", ProtoField.uint8(p .. ".status", "Status", base.DEC))
	field(k .. "_res", ProtoField.uint24(p .. ".reserved", "Reserved", base.HEX))
end

-- The EV, split (endpoint.EV): bits 0..3 plane, 4..13 path choice, 14..15
-- always set, 16..31 flow label.
field("ev", ProtoField.uint32("mrc.ev", "EV (UDP source port | flow label << 16)", base.HEX))
field("ev_plane", ProtoField.uint8("mrc.ev.plane", "Plane", base.DEC))
field("ev_choice", ProtoField.uint16("mrc.ev.choice", "Path Choice", base.DEC))
field("ev_label", ProtoField.uint16("mrc.ev.label", "Flow Label Bits", base.HEX))

mrc.fields = fields

local E = {
	short = ProtoExpert.new("mrc.short", "Packet ends inside an MRC header", expert.group.PROTOCOL, expert.severity.NOTE),
	snap = ProtoExpert.new("mrc.snaplen", "Capture truncated (snaplen) inside the MRC headers", expert.group.UNDECODED, expert.severity.NOTE),
	reserved = ProtoExpert.new("mrc.reserved", "Reserved bits set (mrc's decoder rejects this packet)", expert.group.PROTOCOL, expert.severity.WARN),
	opcode = ProtoExpert.new("mrc.unknown_opcode", "Opcode in the MRC range but not defined by MRC", expert.group.PROTOCOL, expert.severity.WARN),
	length = ProtoExpert.new("mrc.length", "Length differs from the opcode's fixed length", expert.group.PROTOCOL, expert.severity.WARN),
}
mrc.experts = { E.short, E.snap, E.reserved, E.opcode, E.length }

local f_udp_srcport = Field.new("udp.srcport")
local f_ipv6_flow = Field.new("ipv6.flow")
local f_ipv6_dscp = Field.new("ipv6.tclass.dscp")

-- last returns the value of the last occurrence of a field (the inner
-- header under IPv6-in-IPv6), or nil.
local function last(f)
	local all = { f() }
	if #all == 0 then return nil end
	return all[#all].value
end

-- Cursor over the UDP payload: cap is what the capture holds, rep what the
-- packet holds on the wire.
local function cursor(tvb, tree)
	return { tvb = tvb, tree = tree, off = 0, cap = tvb:len(), rep = tvb:reported_len() }
end

local header_names = {
	bth = "BTH", meth = "METH", tseth = "TSETH", reth = "RETH", imm = "ImmDt", aeth = "AETH",
	seth = "SETH", cc = "CC_STATE", neth = "NETH", peth = "PETH", erth = "ERTH", eeth = "EETH",
}

-- header adds header key of n bytes at the cursor and returns its subtree,
-- or nil when the packet or the capture ends inside it (then it says so
-- and the caller stops).
local function header(c, key, n)
	local o = c.off
	if o + n <= c.cap then
		c.off = o + n
		return c.tree:add(F[key], c.tvb(o, n))
	end
	local have = math.min(c.cap, c.rep) - o
	local item = c.tree
	if have > 0 and key ~= "imm" then -- a header's bytes (not a partial ImmDt value)
		item = c.tree:add(F[key], c.tvb(o, have))
	end
	if o + n > c.rep then
		item:add_proto_expert_info(E.short, string.format(
			"Packet ends %d bytes into the %d-byte %s (a trimmed packet keeps only its first bytes)",
			math.max(c.rep - o, 0), n, header_names[key]))
	else
		item:add_proto_expert_info(E.snap, string.format(
			"Capture holds %d of the %d bytes of the %s (snaplen)", math.max(have, 0), n, header_names[key]))
	end
	c.done = true
	return nil
end

-- Header layouts: { field key, offset, length }, in wire order. res marks
-- a reserved field (true: every bit; a number: the reserved bits), which
-- must be 0; ev an EV, shown split.
local LAYOUT = {
	bth = {
		{ "opcode", 0, 1 }, { "se", 1, 1 }, { "migreq", 1, 1 }, { "padcnt", 1, 1 }, { "tver", 1, 1, res = 0x0F },
		{ "pkey", 2, 2 }, { "bth_res4", 4, 1, res = true }, { "destqp", 5, 3 }, { "ackreq", 8, 1 }, { "rtx", 8, 1 },
		{ "ts", 8, 1 }, { "bth_res8", 8, 1, res = 0x1F }, { "psn", 9, 3 },
	},
	meth = { { "rqmsn", 0, 2 }, { "msn", 2, 2 } },
	tseth = { { "tseth_ts", 0, 2 }, { "tseth_coarse", 2, 2 }, { "tseth_res", 2, 2, res = 0x7FFF } },
	reth = { { "va", 0, 8 }, { "rkey", 8, 4 }, { "dmalen", 12, 4 } },
	imm = {}, -- the header item is the value
	aeth = { { "syndrome", 0, 1 }, { "aeth_msn", 1, 3 } },
	seth = {
		{ "seth_m", 0, 1 }, { "seth_p", 0, 1 }, { "seth_r", 0, 1 }, { "seth_res0", 0, 1, res = 0x0F },
		{ "seth_res1", 1, 1, res = true }, { "ack_offset", 2, 2 }, { "seth_ev", 4, 4, ev = true },
		{ "seth_res8", 8, 1, res = true }, { "cack", 9, 3 }, { "mpr", 12, 1 }, { "seth_res13", 13, 1, res = true },
		{ "sack_offset", 14, 2 }, { "bitmap", 16, 8 }, { "seth_res24", 24, 4, res = true },
	},
	cc = {
		{ "cc_ts", 0, 2 }, { "cc_restore", 2, 2 }, { "cc_ooo", 2, 2 }, { "cc_res", 4, 1, res = 0x80 },
		{ "cc_pen", 4, 1 }, { "cc_bytes", 5, 3 },
	},
	neth = {
		{ "code", 0, 1 }, { "neth_r", 1, 1 }, { "neth_res1", 1, 1, res = 0x7F }, { "neth_ts", 2, 2 },
		{ "neth_ev", 4, 4, ev = true }, { "neth_res8", 8, 1, res = true }, { "neth_psn", 9, 3 },
	},
	peth = { { "peth_ev", 0, 4, ev = true }, { "peth_seq", 4, 2 }, { "peth_ts", 6, 2 } },
}
for _, k in ipairs({ "erth", "eeth" }) do
	LAYOUT[k] = {
		{ k .. "_op", 0, 2 }, { k .. "_req", 2, 2 }, { k .. "_mask", 4, 4 },
		{ k .. "_status", 8, 1, res = k == "erth" }, -- a request's status is 0
		{ k .. "_res", 9, 3, res = true },
	}
end
local LEN = {
	bth = BTH_LEN, meth = METH_LEN, tseth = TSETH_LEN, reth = RETH_LEN, imm = IMM_LEN, aeth = AETH_LEN,
	seth = SETH_LEN, cc = CCSTATE_LEN, neth = NETH_LEN, peth = PETH_LEN, erth = ERTH_LEN, eeth = ERTH_LEN,
}

local function add_ev(t, key, range)
	local ev = range:uint()
	local item = t:add(F[key], range)
	item:add(F.ev_plane, range, bit32.band(ev, 0xF))
	item:add(F.ev_choice, range, bit32.band(bit32.rshift(ev, 4), 0x3FF))
	item:add(F.ev_label, range, bit32.rshift(ev, 16))
end

-- decode adds header key at the cursor, field by field; nil when the
-- packet or the capture ends inside it.
local function decode(c, key)
	local t = header(c, key, LEN[key])
	if not t then return nil end
	local o = c.off - LEN[key]
	for _, f in ipairs(LAYOUT[key]) do
		local r = c.tvb(o + f[2], f[3])
		if f.ev then
			add_ev(t, f[1], r)
		else
			local item = t:add(F[f[1]], r)
			if f.res then
				local v = r:uint()
				if f.res ~= true then v = bit32.band(v, f.res) end
				if v ~= 0 then item:add_proto_expert_info(E.reserved) end
			end
		end
	end
	return t
end

local function dissect_bth(c)
	local t = decode(c, "bth")
	if not t then return nil end
	local tvb = c.tvb
	local flags = tvb(8, 1):uint()
	local b = {
		opcode = tvb(0, 1):uint(),
		destqp = tvb(5, 3):uint(),
		psn = tvb(9, 3):uint(),
		rtx = bit32.band(flags, 0x40) ~= 0,
		ts = bit32.band(flags, 0x20) ~= 0,
	}
	t:append_text(string.format(", %s, QP 0x%06x, PSN %d", opcodes[b.opcode] or "?", b.destqp, b.psn))
	return b
end

-- icrc adds the 4-byte ICRC at the cursor when the capture holds it.
local function icrc(c)
	if c.done then return end
	if c.off + ICRC_LEN <= c.cap then
		c.tree:add(F.icrc, c.tvb(c.off, ICRC_LEN))
		c.off = c.off + ICRC_LEN
	elseif c.off + ICRC_LEN <= c.rep then
		c.tree:add_proto_expert_info(E.snap, "Capture ends before the ICRC (snaplen, or a payload the simulator elided)")
		c.done = true
	end
end

-- control decodes a control packet's headers and its ICRC, and checks its
-- fixed length.
local function control(c, ...)
	local want = BTH_LEN + ICRC_LEN
	for _, key in ipairs({ ... }) do
		want = want + LEN[key]
		if not decode(c, key) then return end
	end
	icrc(c)
	if c.rep ~= want then
		c.tree:add_proto_expert_info(E.length, string.format("UDP payload is %d bytes, the opcode's packet %d", c.rep, want))
	end
end

local function dissect_data(c, b, trimmed)
	if not decode(c, "meth") then return end
	if b.ts and not decode(c, "tseth") then return end
	if not decode(c, "reth") then return end
	if (b.opcode == OP_WRITE_LAST_IMM or b.opcode == OP_WRITE_ONLY_IMM) and not decode(c, "imm") then return end
	-- Payload: everything up to the ICRC (a trimmed packet has none).
	local tail = trimmed and 0 or ICRC_LEN
	local plen = c.rep - c.off - tail
	if plen < 0 then
		c.tree:add_proto_expert_info(E.short, "Packet too short for its ICRC")
		return
	end
	local have = math.min(plen, c.cap - c.off)
	local pt = c.tree
	if have > 0 then
		pt = c.tree:add(F.payload, c.tvb(c.off, have))
		pt:set_text(string.format("Payload: %d bytes on the wire, %d captured", plen, have))
	end
	pt:add(F.payload_len, plen):set_generated()
	if have < plen then
		c.done = true
		return
	end
	c.off = c.off + plen
	if not trimmed then icrc(c) end
end

local infiniband -- the RoCEv2 dissector that had UDP 4791 before us

function mrc.dissector(tvb, pinfo, tree)
	if tvb:len() < 1 then return 0 end
	local op = tvb(0, 1):uint()
	if op < OP_FIRST or op > OP_LAST then
		if infiniband then return infiniband:call(tvb, pinfo, tree) end
		return 0
	end
	pinfo.cols.protocol:set("MRC")
	local root = tree:add(mrc, tvb())
	local c = cursor(tvb, root)

	-- The EV rides in the UDP source port and the (inner) flow label.
	local sport, flow = last(f_udp_srcport), last(f_ipv6_flow)
	if sport and flow then
		local ev = bit32.bor(sport, bit32.lshift(bit32.band(flow, 0xFFFF), 16))
		local e = root:add(F.ev, ev):set_generated()
		e:add(F.ev_plane, bit32.band(ev, 0xF)):set_generated()
		e:add(F.ev_choice, bit32.band(bit32.rshift(ev, 4), 0x3FF)):set_generated()
		e:add(F.ev_label, bit32.rshift(ev, 16)):set_generated()
	end
	local dscp = last(f_ipv6_dscp)
	local trimmed = dscp == DSCP_TRIMMED or dscp == DSCP_TRIMMED_LASTHOP

	local b = dissect_bth(c)
	if not b then return tvb:len() end
	local name = opcodes[op]
	local info = string.format("%s QP=0x%06x PSN=%d", name or string.format("0x%02X", op), b.destqp, b.psn)
	if b.rtx then info = info .. " rtx" end
	if trimmed then info = info .. " [trimmed]" end
	pinfo.cols.info:set(info)
	root:append_text(", " .. (name or "unknown opcode"))

	if op >= OP_WRITE_FIRST and op <= OP_WRITE_ONLY_IMM then
		dissect_data(c, b, trimmed)
	elseif op == OP_ACK then
		control(c, "aeth")
	elseif op == OP_SACK then
		control(c, "seth", "cc")
		if c.off > BTH_LEN and bit32.rshift(tvb(BTH_LEN, 1):uint(), 6) == 3 then
			root:add_proto_expert_info(E.reserved, "Path feedback M = 3 is reserved")
		end
	elseif op == OP_NACK then
		control(c, "neth")
		if c.off > BTH_LEN then
			local code = tvb(BTH_LEN, 1):uint()
			pinfo.cols.info:append(" " .. (nack_codes[code] or string.format("code 0x%02X", code)))
		end
	elseif op == OP_PROBE then
		control(c, "peth")
	elseif op == OP_ENDPOINT_REQ then
		control(c, "erth")
	elseif op == OP_ENDPOINT_RESP then
		control(c, "eeth")
	else
		root:add_proto_expert_info(E.opcode)
		if c.off < c.cap then
			local d = root:add(F.payload, tvb(c.off, c.cap - c.off))
			d:add(F.payload_len, c.rep - c.off):set_generated()
		end
	end
	return tvb:len()
end

local udp_port = DissectorTable.get("udp.port")
infiniband = udp_port:get_dissector(UDP_PORT)
udp_port:add(UDP_PORT, mrc)
