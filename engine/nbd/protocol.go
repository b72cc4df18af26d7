// Package nbd serves a block device over the NBD protocol (fixed newstyle
// handshake, simple replies), so standard clients such as qemu-io,
// qemu-img and nbdcopy can read and write a volume.
package nbd

// Protocol constants, from the NBD protocol specification.
const (
	nbdMagic      = 0x4e42444d41474943 // "NBDMAGIC"
	optMagic      = 0x49484156454f5054 // "IHAVEOPT"
	optReplyMagic = 0x0003e889045565a9
	requestMagic  = 0x25609513
	replyMagic    = 0x67446698

	flagFixedNewstyle = 1 << 0
	flagNoZeroes      = 1 << 1

	clientFlagFixedNewstyle = 1 << 0
	clientFlagNoZeroes      = 1 << 1

	optExportName = 1
	optAbort      = 2
	optList       = 3
	optInfo       = 6
	optGo         = 7

	repAck          = 1
	repServer       = 2
	repInfo         = 3
	repErrUnsup     = 1<<31 + 1
	repErrInvalid   = 1<<31 + 3
	repErrUnknown   = 1<<31 + 6
	infoExport      = 0
	infoBlockSize   = 3
	transHasFlags   = 1 << 0
	transSendFlush  = 1 << 2
	transSendFUA    = 1 << 3
	transSendTrim   = 1 << 5
	transWriteZeros = 1 << 6

	cmdRead        = 0
	cmdWrite       = 1
	cmdDisc        = 2
	cmdFlush       = 3
	cmdTrim        = 4
	cmdWriteZeroes = 6

	cmdFlagFUA = 1 << 0

	errPerm    = 1
	errIO      = 5
	errInvalid = 22
	errNoSpace = 28
	errNotSup  = 95

	// maxRequest bounds one read or write.
	maxRequest = 32 << 20
	// maxOption bounds one option's data in the handshake.
	maxOption = 64 << 10
)
