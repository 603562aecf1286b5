// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title SettlementBatch
/// @notice Submits several EIP-3009 `transferWithAuthorization` calls to one token in one
/// transaction, each on its own: a call that reverts (an authorization used or cancelled meanwhile,
/// a payer short of funds) is reported in `Failed` and the others go on. Whether an authorization
/// was settled is read from the token's own `AuthorizationUsed` event in the receipt, never from
/// this contract. It holds no funds and no allowances, and forwards nothing but
/// `transferWithAuthorization`, whose authority is the payer's signature: anyone may call it.
contract SettlementBatch {
    /// `transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)`
    bytes4 private constant TRANSFER_WITH_AUTHORIZATION = 0xe3ee160e;

    /// @param index the call's position in the batch
    /// @param reason the token's revert data
    event Failed(uint256 indexed index, bytes reason);

    /// @param token the EIP-3009 token every call goes to
    /// @param calls ABI-encoded `transferWithAuthorization` calls
    function settle(address token, bytes[] calldata calls) external {
        // A call to an address without code succeeds and does nothing: refuse instead.
        require(token.code.length > 0, "token has no code");
        for (uint256 i = 0; i < calls.length; i++) {
            require(calls[i].length >= 4 && bytes4(calls[i][:4]) == TRANSFER_WITH_AUTHORIZATION, "not a transferWithAuthorization");
            (bool ok, bytes memory reason) = token.call(calls[i]);
            if (!ok) emit Failed(i, reason);
        }
    }
}
